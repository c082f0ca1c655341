"""The synthesized definition under AWS's errors, run by the real interpreter with answering handlers (no jobs):
throttling everywhere is absorbed by the Retry of each Task; a failed job and a lost endpoint reach NotifyFailure."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from local.definition import resolve_definition
from local.tasks import RunContext
from tests.synth import ROOT, synth_template


@pytest.fixture(scope="module")
def definition_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("definition") / "definition.json"
    path.write_text(json.dumps(resolve_definition(synth_template("dev"), "us-east-1", "123456789012")))
    return path


def execute(definition_file: Path, folder: Path, *faults: str) -> tuple[dict, str, str]:
    """Runs the definition with ``faults`` injected: (result, console, notifications)."""
    context = RunContext("", "", str(folder / "s3"), str(folder / "efs"), str(folder), faults=faults)
    (folder / "context.json").write_text(json.dumps(dataclasses.asdict(context)))
    (folder / "input.json").write_text("{}")
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT), "LOCAL_TASKS": "tests.answering_tasks"}
    run = subprocess.run(
        [str(ROOT / "node_modules/.bin/node"), str(ROOT / "local/run_state_machine.mjs"), str(definition_file),
         str(folder / "input.json"), str(folder / "context.json"), "faults", str(folder / "result.json")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    notifications = (folder / "notifications.log").read_text() if (folder / "notifications.log").exists() else ""
    return json.loads((folder / "result.json").read_text()), run.stdout + run.stderr, notifications


def test_one_throttling_error_in_every_service_call_is_retried_and_the_execution_succeeds(definition_file, tmp_path):
    result, console, notifications = execute(definition_file, tmp_path, "throttle")
    assert result["status"] == "SUCCEEDED", console[-3000:]
    retried = {line.split(":")[0].removeprefix("↻ ") for line in console.splitlines() if line.startswith("↻ ")}
    assert retried == {
        "Plan", "TrainTokenizer", "WriteShards", "StartDataSync", "DescribeDataSync", "Train", "CreateModel",
        "CreateEndpointConfig", "FindEndpoint", "UpdateEndpoint", "DescribeUpdatedEndpoint",
        "DescribeOldEndpointConfig", "DeleteOldEndpointConfig", "DeleteOldModel", "NotifySuccess",
    }  # fmt: skip
    assert "GPT pre-training succeeded" in notifications


def test_a_failed_job_goes_to_the_failure_notification(definition_file, tmp_path):
    result, console, notifications = execute(definition_file, tmp_path, "failed-job")
    assert (result["status"], result["error"]) == ("FAILED", "States.TaskFailed"), console[-3000:]
    assert "→ TrainTokenizer: caught, going to NotifyFailure" in console
    assert "Error: States.TaskFailed" in notifications and "an injected fault" in notifications


def test_a_lost_endpoint_is_retried_then_goes_to_the_failure_notification(definition_file, tmp_path):
    result, console, notifications = execute(definition_file, tmp_path, "lost-endpoint")
    assert (result["status"], result["error"]) == ("FAILED", "SageMaker.SageMakerException"), console[-3000:]
    assert console.count("↻ FindEndpoint: retry") == 5  # none yet, or throttled: the same error name
    assert "→ FindEndpoint: caught, going to CreateEndpoint" in console  # the stage's first endpoint
    assert console.count("↻ DescribeEndpoint: retry") == 5  # MaxAttempts: retries after the first call
    assert "→ DescribeEndpoint: caught, going to NotifyFailure" in console
    assert result["cause"].startswith('Could not find endpoint "gpt-dev-endpoint". (Service: SageMaker')
    assert "GPT pre-training failed" in notifications and "Error: SageMaker.SageMakerException" in notifications
