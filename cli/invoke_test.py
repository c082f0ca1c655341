"""The invoke command against a stubbed sagemaker-runtime (botocore's Stubber)."""

import io
import json

import boto3
from botocore.response import StreamingBody
from botocore.stub import Stubber

from cli.__main__ import main
from cli.invoke import error_message, invoke, request_body


class StubbedSession:
    def __init__(self):
        self.runtime = boto3.client(
            "sagemaker-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
        )
        self.stub = Stubber(self.runtime)

    def client(self, name):
        assert name == "sagemaker-runtime"
        return self.runtime


def reply(data: bytes) -> dict:
    return {"Body": StreamingBody(io.BytesIO(data), len(data)), "ContentType": "application/json"}


def test_invoke_sends_the_text_generation_request_and_decodes_the_reply():
    session = StubbedSession()
    body = request_body("def main(", max_new_tokens=8, top_k=40, seed=1)
    assert body == {"inputs": "def main(", "parameters": {"max_new_tokens": 8, "top_k": 40, "seed": 1}}
    expected = {
        "EndpointName": "gpt-dev",
        "ContentType": "application/json",
        "Accept": "application/json",
        "Body": json.dumps(body),
    }
    session.stub.add_response("invoke_endpoint", reply(b'[{"generated_text": "def main():"}]'), expected)
    session.stub.activate()
    assert invoke("dev", "gpt-dev", body, session) == [{"generated_text": "def main():"}]
    session.stub.assert_no_pending_responses()


def test_a_refused_request_prints_the_models_reason(monkeypatch, capsys):
    session = StubbedSession()
    message = json.dumps({"error": "400 Bad Request: the prompt is 40 tokens; ..."})
    session.stub.add_client_error(
        "invoke_endpoint",
        service_error_code="ModelError",
        service_message=f"Received server error (500) from primary with message {message}",
        http_status_code=424,
        modeled_fields={"OriginalStatusCode": 500, "OriginalMessage": message},
    )
    session.stub.activate()
    monkeypatch.setattr("boto3.Session", lambda **kwargs: session)
    assert main(["invoke", "--endpoint", "gpt-dev", "--max-new-tokens", "9", "x " * 40]) == 1
    assert capsys.readouterr().err.strip() == "ModelError (500): 400 Bad Request: the prompt is 40 tokens; ..."
    assert error_message(ValueError("no credentials")) == "no credentials"


def test_the_command_prints_the_generated_text(monkeypatch, capsys):
    session = StubbedSession()
    session.stub.add_response("invoke_endpoint", reply(b'[{"generated_text": "def main():\\n    pass"}]'))
    session.stub.activate()
    monkeypatch.setattr("boto3.Session", lambda **kwargs: session)
    assert main(["invoke", "--stage", "dev", "--endpoint", "gpt-dev", "def main("]) == 0
    assert capsys.readouterr().out == "def main():\n    pass\n"
