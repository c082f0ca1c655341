"""Every failure a user can cause at the terminal is one line that says what to do (no traceback)."""

import json

import boto3
import pytest
from botocore.stub import Stubber

from cli.__main__ import main
from cli.errors import user_message


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """An environment with no AWS credentials anywhere, and no instance-metadata lookup (no network)."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)


def one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


@pytest.mark.parametrize(
    "argv", [["check"], ["start", "--stage", "dev"], ["invoke", "--stage", "dev", "--endpoint", "gpt-dev", "def main("]]
)
def test_no_credentials_is_one_line_that_says_how_to_configure_them(no_credentials, capsys, argv):
    assert main(argv) == 1
    line = one_line_error(capsys)
    assert line.startswith("error: no usable AWS credentials")
    assert "aws configure" in line


def test_a_stack_that_is_not_deployed_says_deploy_it(monkeypatch, capsys):
    cloudformation = boto3.client(
        "cloudformation", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stub = Stubber(cloudformation)
    stub.add_client_error("describe_stacks", "ValidationError", "Stack with id GptPretraining-dev does not exist", 400)
    stub.activate()
    session = type("Session", (), {"client": lambda self, name: cloudformation})()
    monkeypatch.setattr("boto3.Session", lambda **kwargs: session)
    assert main(["start", "--stage", "dev"]) == 1
    line = one_line_error(capsys)
    assert "GptPretraining-dev does not exist" in line and "make deploy" in line


def test_bad_arguments_are_refused_before_any_call(capsys, tmp_path, no_credentials):
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["start", "--input", str(tmp_path / "bad.json")]) == 1
    assert "not valid JSON" in one_line_error(capsys)
    assert main(["start", "--input", str(tmp_path / "missing.json")]) == 1
    assert f"cannot read {tmp_path / 'missing.json'}" in one_line_error(capsys)
    assert main(["start", "--stage", "qa"]) == 1
    assert "invalid configuration: stage: 'qa'" in one_line_error(capsys)


def test_unexpected_errors_keep_their_traceback():
    assert user_message(RuntimeError("a bug")) is None
    assert user_message(json.JSONDecodeError("x", "doc", 0)).startswith("the input is not valid JSON")


def test_check_names_the_account_in_use(monkeypatch, capsys):
    sts = boto3.client("sts", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(sts)
    arn = "arn:aws:iam::123456789012:user/ml"
    stub.add_response("get_caller_identity", {"UserId": "AIDA", "Account": "123456789012", "Arn": arn})
    stub.activate()
    session = type("Session", (), {"client": lambda self, name: sts})()
    monkeypatch.setattr("boto3.Session", lambda **kwargs: session)
    assert main(["check"]) == 0
    assert capsys.readouterr().out == f"AWS credentials: account 123456789012, {arn}\n"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"corpus": {"s3_uri": "/tmp/mycorpus/"}}', "error: corpus.s3_uri: '/tmp/mycorpus/' is not valid"),
        (b'{"corpus": {"s3_uri": 123}}', "error: corpus.s3_uri: 123 is not valid"),
        (b'{"corpus": "\xff\xfe"}', "input.json: not UTF-8 text (invalid start byte at byte 12)"),
        (b"[" * 100_000 + b"]" * 100_000, "input.json: nested too deep to read"),
    ],
    ids=["a local path", "a number", "not UTF-8", "nested 100,000 deep"],
)
def test_validate_says_what_is_wrong_with_any_input_in_lines_without_a_traceback(tmp_path, capsys, content, says):
    (tmp_path / "input.json").write_bytes(content)
    assert main(["validate", "--input", str(tmp_path / "input.json")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("error: ") and says in err.splitlines()[0], err


def test_an_error_no_check_explains_is_one_line_with_its_type_and_traceback_shows_it(monkeypatch, capsys):
    def broken(args, session=None):
        raise KeyError("something nobody foresaw\nover two lines")

    monkeypatch.setattr("cli.__main__.run", broken)
    assert main(["status"]) == 1
    line = one_line_error(capsys)
    assert line.startswith("error: KeyError: ") and "python -m cli --traceback" in line
    with pytest.raises(KeyError):
        main(["--traceback", "status"])
