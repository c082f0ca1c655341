"""start --wait, status and stop against stubbed Step Functions and CloudWatch Logs (botocore's Stubber)."""

from __future__ import annotations

import datetime
import json

from botocore.stub import ANY

from cli.__main__ import main
from cli.conftest import MACHINE
from cli.follow import readable_cause

EXECUTION = MACHINE.replace(":stateMachine:", ":execution:") + ":first-run"
JOB = "gpt-dev-first-run-train"
PLAN_ERROR = json.dumps(
    {"errorType": "InputError", "errorMessage": "training.instance_count: 0 is not valid", "stackTrace": ["  File"]}
)


def event(id: int, kind: str, **details) -> dict:
    return {"id": id, "type": kind, "timestamp": "2026-12-01T12:00:00Z", **details}


def entered(id, name, kind="TaskStateEntered"):
    return event(id, kind, stateEnteredEventDetails={"name": name})


def exited(id, name):
    return event(id, "TaskStateExited", stateExitedEventDetails={"name": name})


def execution(status: str, **extra) -> dict:
    return {
        "executionArn": EXECUTION,
        "stateMachineArn": MACHINE,
        "name": "first-run",
        "status": status,
        "startDate": datetime.datetime(2026, 12, 1, 12, tzinfo=datetime.UTC),  # boto3 parses it so
        **extra,
    }


def expect_poll(aws, status: str, events: list[dict], logs: list[dict] | None = None, **extra):
    """One look: the execution's status, its jobs' new log lines (once it has a job), its new events."""
    sfn = aws.stub("stepfunctions")
    sfn.add_response("describe_execution", execution(status, **extra), {"executionArn": EXECUTION})
    sfn.add_response("get_execution_history", {"events": events}, {"executionArn": EXECUTION, "maxResults": 1000})
    if logs is not None:
        expect_logs(aws, logs)


def expect_logs(aws, logs: list[dict]):
    expected = {"logGroupName": "/aws/sagemaker/TrainingJobs", "logStreamNamePrefix": f"{JOB}/", "startTime": ANY}
    aws.stub("logs").add_response("filter_log_events", {"events": logs}, expected)


def test_start_wait_follows_the_states_and_the_training_logs_until_the_end(aws, tmp_path, capsys):
    (tmp_path / "in.json").write_text('{"corpus": {"s3_uri": "s3://raw/pile/"}}')
    aws.stack()
    aws.stub("stepfunctions").add_response(
        "start_execution",
        {"executionArn": EXECUTION, "startDate": "2026-12-01"},
        {"stateMachineArn": MACHINE, "name": "first-run", "input": '{"corpus": {"s3_uri": "s3://raw/pile/"}}'},
    )
    train = {
        "resourceType": "sagemaker",
        "resource": "createTrainingJob.sync",
        "region": "us-east-1",
        "parameters": json.dumps({"TrainingJobName": JOB}),
    }
    line = {"logStreamName": f"{JOB}/algo-1-1733050000", "timestamp": 1, "message": "step 10 loss 9.81\n"}
    expect_poll(aws, "RUNNING", [entered(1, "Plan"), exited(2, "Plan"), entered(3, "Train")])
    expect_poll(aws, "RUNNING", [event(4, "TaskScheduled", taskScheduledEventDetails=train)])
    expect_poll(aws, "RUNNING", [], [{**line, "eventId": "a"}])
    last = {**line, "eventId": "b", "timestamp": 2, "message": "step 20 loss 7.02"}
    expect_poll(
        aws, "SUCCEEDED", [exited(5, "Train"), event(6, "ExecutionSucceeded")], [{**line, "eventId": "a"}, last]
    )
    expect_logs(aws, [last])  # the last look after the end: nothing new

    code = main(["start", "--stage", "dev", "--input", str(tmp_path / "in.json"), "--name", "first-run", "--wait"])

    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[2:] == [
        "▶ Plan",
        "✓ Plan",
        "▶ Train",
        f"  TrainingJob {JOB}: its logs follow (/aws/sagemaker/TrainingJobs)",
        "  [algo-1] step 10 loss 9.81",
        "  [algo-1] step 20 loss 7.02",  # the line seen before is not shown again
        "✓ Train",
        "Execution first-run succeeded.",
    ]
    aws.assert_done()


def test_a_failed_plan_is_one_cross_with_its_message_and_no_tick(aws, tmp_path, capsys):
    (tmp_path / "in.json").write_text("{}")
    aws.stack()
    aws.stub("stepfunctions").add_response("start_execution", {"executionArn": EXECUTION, "startDate": "2026-12-01"})
    failed = event(
        3, "LambdaFunctionFailed", lambdaFunctionFailedEventDetails={"error": "InputError", "cause": PLAN_ERROR}
    )
    events = [
        entered(1, "Plan"),
        event(2, "LambdaFunctionScheduled", lambdaFunctionScheduledEventDetails={"resource": "f"}),
        failed,
        exited(4, "Plan"),
    ]
    expect_poll(aws, "FAILED", events, error="InputError", cause=PLAN_ERROR)

    assert main(["start", "--input", str(tmp_path / "in.json"), "--wait"]) == 1
    out = capsys.readouterr().out.splitlines()[2:]
    assert out == [
        "▶ Plan",
        "✗ Plan: InputError: training.instance_count: 0 is not valid",
        "Execution first-run FAILED: InputError: training.instance_count: 0 is not valid",
    ]


def test_status_shows_the_latest_execution_and_stop_stops_it(aws, capsys):
    aws.stack()
    aws.stub("stepfunctions").add_response(
        "list_executions",
        {"executions": [{**execution("RUNNING"), "stateMachineArn": MACHINE}]},
        {"stateMachineArn": MACHINE, "maxResults": 1},
    )
    expect_poll(aws, "RUNNING", [entered(1, "Plan"), exited(2, "Plan"), entered(3, "Train")])
    assert main(["status"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "▶ Plan",
        "✓ Plan",
        "▶ Train",
        "first-run: RUNNING (started 2026-12-01 12:00:00+00:00)",
    ]
    aws.stack()
    aws.stub("stepfunctions").add_response(
        "stop_execution",
        {"stopDate": "2026-12-01"},
        {"executionArn": EXECUTION, "error": "Stopped", "cause": "stopped with python -m cli stop"},
    )
    assert main(["stop", "first-run"]) == 0
    assert "checkpoints the step in flight); start again with the same run_name" in capsys.readouterr().out
    aws.assert_done()


def test_a_cause_is_its_message_without_the_stack_trace():
    assert readable_cause(PLAN_ERROR) == "training.instance_count: 0 is not valid"
    assert readable_cause('{"FailureReason": "AlgorithmError: OOM"}') == "AlgorithmError: OOM"
    assert readable_cause("States.Timeout") == "States.Timeout"
