"""The start command against stubbed AWS APIs (botocore's Stubber: the control plane is the one thing faked)."""

import json

import pytest

from cli.conftest import MACHINE as ARN
from cli.conftest import StubbedSession
from cli.errors import CommandError
from cli.start import execution_console_url, execution_name, start

EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:Workflow:my-run"


def test_start_finds_the_state_machine_and_passes_the_input(tmp_path):
    session = StubbedSession()
    payload = {"training": {"instance_count": 2}}
    (tmp_path / "in.json").write_text(json.dumps(payload))
    session.stack()
    session.stub("stepfunctions").add_response(
        "start_execution",
        {"executionArn": EXECUTION, "startDate": "2026-11-30"},
        {"stateMachineArn": ARN, "name": "my-run", "input": json.dumps(payload)},
    )
    assert start("dev", tmp_path / "in.json", "my-run", session) == EXECUTION


def test_bad_input_file_is_refused_before_anything_starts(tmp_path):
    (tmp_path / "in.json").write_text("{not json")
    session = StubbedSession()  # no answers: a call would fail the test
    with pytest.raises(CommandError, match="not valid JSON"):
        start("dev", tmp_path / "in.json", None, session)


def test_an_input_with_a_key_twice_is_refused_before_anything_starts(tmp_path):
    """Issue 50, item 8: Step Functions, like Python, keeps the last of two equal keys, silently."""
    (tmp_path / "in.json").write_text('{"hyperparameters": {"learning_rate": 3e-4, "learning_rate": 3e-3}}')
    with pytest.raises(CommandError, match="the key 'learning_rate' appears twice in one object"):
        start("dev", tmp_path / "in.json", None, StubbedSession())


def test_names_and_links():
    assert execution_name("my run/1") == "my-run-1"
    assert execution_console_url(EXECUTION).startswith("https://us-east-1.console.aws.amazon.com/states/home")
