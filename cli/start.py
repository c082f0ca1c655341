"""Start a workflow execution of a deployed stack and print where to watch it.

    python -m cli start --stage dev --input my-input.json [--name my-run] [--wait]

The state machine is found through the stack's outputs, so nothing but the stage name is needed.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from cli.stage import stack_output, stack_outputs, stage_session
from cli.validate import read_input

STATE_MACHINE_OUTPUT = "StateMachineArn"


def execution_console_url(execution_arn: str) -> str:
    """The Step Functions console page of one execution."""
    region = execution_arn.split(":")[3]
    return f"https://{region}.console.aws.amazon.com/states/home?region={region}#/v2/executions/details/{execution_arn}"


def execution_name(name: str | None) -> str:
    """A valid, unique-enough execution name (at most 80 of [A-Za-z0-9-_])."""
    name = name or time.strftime("run-%Y%m%d-%H%M%S")
    return re.sub(r"[^A-Za-z0-9_-]", "-", name)[:80]


def start(stage: str, input_path: Path | None, name: str | None, session: Any = None) -> str:
    """Starts the execution and returns its ARN."""
    payload = input_path.read_text() if input_path else "{}"
    if input_path:
        read_input(input_path)  # a clear error here (not JSON, a key twice), before any call, beats a failed execution
    session = session or stage_session(stage)
    arn = stack_output(stack_outputs(session, stage), STATE_MACHINE_OUTPUT, stage)
    response = session.client("stepfunctions").start_execution(
        stateMachineArn=arn, name=execution_name(name), input=payload
    )
    return response["executionArn"]
