"""A boto3 session whose clients answer from botocore's Stubber: the AWS control plane is the one thing faked."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

STACK = "GptPretraining-dev"
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:Workflow"


class StubbedSession:
    """``client(name)`` returns one stubbed client per service; ``stub(name)`` its Stubber, activated."""

    def __init__(self):
        self.clients, self.stubs = {}, {}

    def client(self, name):
        if name not in self.clients:
            self.clients[name] = boto3.client(
                name, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
            )
            self.stubs[name] = Stubber(self.clients[name])
            self.stubs[name].activate()
        return self.clients[name]

    def stub(self, name):
        self.client(name)
        return self.stubs[name]

    def stack(self, **outputs):
        """The stack's DescribeStacks answer with these outputs (StateMachineArn by default)."""
        outputs = outputs or {"StateMachineArn": MACHINE}
        described = {
            "StackName": STACK,
            "CreationTime": "2026-11-30",
            "StackStatus": "CREATE_COMPLETE",
            "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
        }
        self.stub("cloudformation").add_response("describe_stacks", {"Stacks": [described]}, {"StackName": STACK})

    def assert_done(self):
        for stub in self.stubs.values():
            stub.assert_no_pending_responses()


@pytest.fixture
def aws(monkeypatch) -> StubbedSession:
    """A stubbed session that ``python -m cli`` uses instead of the credentials' one; no sleeping between polls."""
    session = StubbedSession()
    monkeypatch.setattr("cli.__main__.stage_session", lambda stage: session)
    monkeypatch.setattr("cli.follow.time.sleep", lambda seconds: None)
    return session
