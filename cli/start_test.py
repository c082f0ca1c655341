"""The start command against stubbed AWS APIs (botocore's Stubber: the control plane is the one thing faked)."""

import json

import boto3
import pytest
from botocore.stub import Stubber

from cli.start import execution_console_url, execution_name, start

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:Workflow"
EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:Workflow:my-run"


class StubbedSession:
    def __init__(self):
        self.clients = {
            name: boto3.client(name, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
            for name in ("cloudformation", "stepfunctions")
        }
        self.stubs = {name: Stubber(client) for name, client in self.clients.items()}

    def client(self, name):
        return self.clients[name]


def test_start_finds_the_state_machine_and_passes_the_input(tmp_path):
    session = StubbedSession()
    payload = {"training": {"instance_count": 2}}
    (tmp_path / "in.json").write_text(json.dumps(payload))
    session.stubs["cloudformation"].add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "GptPretraining-dev",
                    "CreationTime": "2026-11-30",
                    "StackStatus": "CREATE_COMPLETE",
                    "Outputs": [{"OutputKey": "StateMachineArn", "OutputValue": ARN}],
                }
            ]
        },
        {"StackName": "GptPretraining-dev"},
    )
    session.stubs["stepfunctions"].add_response(
        "start_execution",
        {"executionArn": EXECUTION, "startDate": "2026-11-30"},
        {"stateMachineArn": ARN, "name": "my-run", "input": json.dumps(payload)},
    )
    for stub in session.stubs.values():
        stub.activate()
    assert start("dev", tmp_path / "in.json", "my-run", session) == EXECUTION


def test_bad_input_file_is_refused_before_anything_starts(tmp_path):
    (tmp_path / "in.json").write_text("{not json")
    session = StubbedSession()
    session.stubs["cloudformation"].add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "s",
                    "CreationTime": "2026-11-30",
                    "StackStatus": "CREATE_COMPLETE",
                    "Outputs": [{"OutputKey": "StateMachineArn", "OutputValue": ARN}],
                }
            ]
        },
    )
    session.stubs["cloudformation"].activate()
    with pytest.raises(json.JSONDecodeError):
        start("dev", tmp_path / "in.json", None, session)


def test_names_and_links():
    assert execution_name("my run/1") == "my-run-1"
    assert execution_console_url(EXECUTION).startswith("https://us-east-1.console.aws.amazon.com/states/home")
