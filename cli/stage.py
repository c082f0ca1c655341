"""The deployed stage a command talks to: its configuration (from cdk.json) and an AWS session in its region."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli.errors import CommandError
from infra.config import StageConfig, load_stage_config

CDK_JSON = Path(__file__).resolve().parent.parent / "cdk.json"


def stage_config(stage: str) -> StageConfig:
    """The stage's validated configuration; an unknown stage is a ConfigError naming the valid ones."""
    return load_stage_config({**json.loads(CDK_JSON.read_text())["context"], "stage": stage})


def stage_session(stage: str) -> Any:
    """A boto3 session in the stage's region (credentials from the usual chain)."""
    import boto3

    return boto3.Session(region_name=stage_config(stage).region)


def caller_identity(stage: str, session: Any = None) -> str:
    """The account and principal of the credentials in use; no credentials raise botocore's error."""
    identity = (session or stage_session(stage)).client("sts").get_caller_identity()
    return f"account {identity['Account']}, {identity['Arn']}"


def stack_outputs(session: Any, stage: str) -> dict[str, str]:
    """The deployed stack's outputs by key (buckets, state machine, console links)."""
    stack = stage_config(stage).stack_name
    described = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    return {output["OutputKey"]: output["OutputValue"] for output in described.get("Outputs", [])}


def stack_output(outputs: dict[str, str], key: str, stage: str) -> str:
    """One output; a stack without it (deployed from an older version) is a CommandError naming the fix."""
    if key not in outputs:
        raise CommandError(
            f"stack {stage_config(stage).stack_name} has no {key} output: deploy this version (make deploy)"
        )
    return outputs[key]
