"""The synthesized state machine: valid ASL, each request passed whole, IAM for the .sync integrations."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import botocore.session
import pytest
from aws_cdk.assertions import Template

from infra.plan_step.plan import InputError
from infra.plan_step.requests import TASK_TIMEOUT_SECONDS
from local.definition import resolve_definition
from tests.synth import ROOT, synth_template

SAGEMAKER_STATES = {
    "TrainTokenizer": ("createProcessingJob.sync", "tokenizer"),
    "WriteShards": ("createProcessingJob.sync", "shards"),
    "Train": ("createTrainingJob.sync", "training"),
    "CreateModel": ("createModel", "model"),
    "CreateEndpointConfig": ("createEndpointConfig", "endpoint_config"),
    "CreateEndpoint": ("createEndpoint", "endpoint"),
    "UpdateEndpoint": ("updateEndpoint", "endpoint_update"),
}


@pytest.fixture(scope="module")
def definition() -> dict:
    return resolve_definition(synth_template("dev"), "us-east-1", "123456789012")


def asl_validator(definition: dict, path: Path) -> subprocess.CompletedProcess:
    """Runs asl-validator (on the pinned Node 22) on ``definition`` written to ``path``."""
    path.write_text(json.dumps(definition))
    return subprocess.run(
        [str(ROOT / "node_modules/.bin/node"), str(ROOT / "node_modules/.bin/asl-validator"), "--json-path", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_definition_passes_asl_validator(definition: dict, tmp_path: Path):
    result = asl_validator(definition, tmp_path / "definition.json")
    assert result.returncode == 0, result.stdout + result.stderr


def test_asl_validator_rejects_a_broken_definition(definition: dict, tmp_path: Path):
    broken = json.loads(json.dumps(definition))
    broken["States"]["Plan"]["Next"] = "NoSuchState"
    result = asl_validator(broken, tmp_path / "broken.json")
    assert result.returncode != 0


@pytest.mark.parametrize("state", SAGEMAKER_STATES)
def test_sagemaker_states_pass_the_request_the_builder_returns(definition: dict, state: str):
    action, request = SAGEMAKER_STATES[state]
    task = definition["States"][state]
    assert task["Resource"] == f"arn:aws:states:::sagemaker:{action}"
    assert task["InputPath"] == f"$.plan.requests.{request}" and "Parameters" not in task
    assert any(c["Next"] == "NotifyFailure" for c in task["Catch"])
    if action.endswith(".sync"):  # the default (60 s in the ASL spec) would fail any real job; the table outlasts
        assert task["TimeoutSeconds"] == TASK_TIMEOUT_SECONDS[request]  # each job (requests_test)


def test_every_task_routes_failures_to_the_notification(definition: dict):
    tasks = {name: s for name, s in definition["States"].items() if s["Type"] == "Task" and name != "NotifyFailure"}
    assert len(tasks) >= 10
    for name, state in tasks.items():
        first = {
            "Plan": ["ReadPlanError"],  # a bad input's message without the stack trace
            "FindEndpoint": ["CreateEndpoint"],  # the stage has no endpoint yet
        }.get(name, [])
        assert [c["Next"] for c in state.get("Catch", [])] == [*first, "NotifyFailure"], name
    assert definition["States"]["Plan"]["Catch"][0]["ErrorEquals"] == ["InputError"]
    assert definition["States"]["NotifyFailure"]["Next"] == "Failed"
    for name, state in definition["States"].items():  # every service call is tried again on failure
        if state["Type"] == "Task":
            assert state.get("Retry"), name
    assert definition["States"]["Failed"]["Type"] == "Fail"


def test_state_machine_role_has_the_sync_integration_iam(dev_template: Template):
    statements = [
        s
        for p in dev_template.find_resources("AWS::IAM::Policy").values()
        if "StateMachine" in json.dumps(p["Properties"]["Roles"])
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    by_action = {a: s for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert by_action["iam:PassRole"]["Condition"] == {
        "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}
    }
    assert "SageMakerExecution" in json.dumps(by_action["iam:PassRole"]["Resource"])
    for action in (
        "sagemaker:CreateTrainingJob",
        "sagemaker:DescribeTrainingJob",
        "sagemaker:StopTrainingJob",
        "sagemaker:CreateProcessingJob",
        "sagemaker:DescribeProcessingJob",
        "sagemaker:StopProcessingJob",
    ):
        assert "gpt-dev-*" in json.dumps(by_action[action]["Resource"]), action
    rules = json.dumps(by_action["events:PutRule"]["Resource"])
    assert "StepFunctionsGetEventsForSageMakerTrainingJobsRule" in rules
    assert "StepFunctionsGetEventsForSageMakerProcessingJobsRule" in rules


def test_state_machine_is_traced_and_logs_execution_data(dev_template: Template):
    dev_template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": {"IncludeExecutionData": True, "Level": "ALL"},
        },
    )


@pytest.fixture(scope="module")
def debugger_definition(tmp_path_factory) -> dict:
    config = tmp_path_factory.mktemp("config") / "debugger.json"
    config.write_text(json.dumps({"observability": {"debugger": True}}))
    return resolve_definition(synth_template("dev", str(config)), "us-east-1", "123456789012")


def test_debugger_on_passes_its_fields_and_links_its_report_off_does_neither(definition, debugger_definition):
    on, off = debugger_definition["States"], definition["States"]
    # The Train state passes the Plan step's request whole: the Debugger fields are in it or not (requests_test).
    assert on["Train"] == off["Train"] and on["Train"]["InputPath"] == "$.plan.requests.training"
    assert "$.plan.profiler_report_uri" in json.dumps(on["NotifySuccess"])
    assert "$.plan.profiler_report_uri" not in json.dumps(off["NotifySuccess"])
    assert "$.plan.training_report_uri" in json.dumps(off["NotifySuccess"])
    assert "Hugging Face checkpoint: {}" in json.dumps(off["NotifySuccess"])
    assert "$.plan.hf_checkpoint" in json.dumps(off["NotifySuccess"])
    assert "Corpus files not read: {}" in json.dumps(off["NotifySuccess"])
    assert "$.plan.summary.files_unsupported" in json.dumps(off["NotifySuccess"])


def test_a_bad_inputs_notification_carries_its_message_without_the_lambdas_stack_trace(definition: dict, tmp_path):
    """ReadPlanError and PlanErrorMessage as synthesized, run by the local ASL interpreter on a Lambda's error."""
    states = {name: dict(definition["States"][name]) for name in ("ReadPlanError", "PlanErrorMessage")}
    states["PlanErrorMessage"]["Next"] = "NotifyFailure"
    states["NotifyFailure"] = {"Type": "Pass", "End": True}
    cause = {
        "errorMessage": "training.instance_count: 0 is not valid; expected a positive integer",
        "errorType": "InputError",
        "requestId": "r",
        "stackTrace": ['  File "/var/task/infra/plan_step/plan.py", line 35, in plan_execution\n'],
    }
    (tmp_path / "definition.json").write_text(json.dumps({"StartAt": "ReadPlanError", "States": states}))
    (tmp_path / "input.json").write_text(json.dumps({"error": {"Error": "InputError", "Cause": json.dumps(cause)}}))
    (tmp_path / "context.json").write_text("{}")
    subprocess.run(
        [str(ROOT / "node_modules" / ".bin" / "node"), str(ROOT / "local" / "run_state_machine.mjs")]
        + [str(tmp_path / name) for name in ("definition.json", "input.json", "context.json")]
        + ["e", str(tmp_path / "result.json")],
        cwd=ROOT, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    error = json.loads((tmp_path / "result.json").read_text())["output"]["error"]
    assert error == {"Error": "InputError", "Cause": cause["errorMessage"]}


# The States.* errors a Task state can raise (ASL spec, "Errors"); States.Runtime is absent: no Retry or Catch
# handles it, and States.HeartbeatTimeout needs HeartbeatSeconds, which no state sets.
TASK_STATES_ERRORS = {
    "States.ALL",
    "States.Timeout",
    "States.TaskFailed",
    "States.Permissions",
    "States.ResultPathMatchFailure",
    "States.ParameterPathFailure",
    "States.DataLimitExceeded",
    "States.IntrinsicFailure",
}
# Documented outside the service models. The guide's AWS SDK table: each service's exception prefix; an SDK error
# the model does not list arrives as the Java SDK v2 base exception (<Prefix>.<Prefix>Exception). The optimized
# integrations: SageMaker.AmazonSageMakerException (the guide's SageMaker examples), SNS.AmazonSNSException, and the
# Lambda errors of the guide's "Handle transient Lambda service exceptions".
SDK_PREFIX = {"datasync": "DataSync", "sagemaker": "SageMaker"}
OPTIMIZED = {
    "sagemaker": ("SageMaker", {"SageMaker.AmazonSageMakerException"}),
    "sns": ("SNS", {"SNS.AmazonSNSException"}),
    "lambda": (
        "Lambda",
        {"Lambda.AWSLambdaException", "Lambda.SdkClientException", "Lambda.ClientExecutionTimeoutException"},
    ),
}


def modeled(service: str, action: str, prefix: str) -> set[str]:
    """``prefix.Name`` for every error botocore's model lists for the operation, always ending in Exception."""
    model = botocore.session.get_session().get_service_model(service)
    shapes = model.operation_model(action[0].upper() + action[1:]).error_shapes
    return {f"{prefix}.{s.name}" + ("" if s.name.endswith("Exception") else "Exception") for s in shapes}


def raisable(resource: str) -> set[str]:
    """Every error name Step Functions can report for a Task state with this ``Resource``."""
    if resource.startswith("arn:aws:states:::aws-sdk:"):
        service, action = resource.removeprefix("arn:aws:states:::aws-sdk:").split(":")
        prefix = SDK_PREFIX[service]
        return TASK_STATES_ERRORS | modeled(service, action, prefix) | {f"{prefix}.{prefix}Exception"}
    if resource.startswith("arn:aws:states:::"):
        service, action = resource.removeprefix("arn:aws:states:::").removesuffix(".sync").split(":")
        prefix, documented = OPTIMIZED[service]
        return TASK_STATES_ERRORS | modeled(service, action, prefix) | documented
    prefix, documented = OPTIMIZED["lambda"]  # a function's ARN: Lambda's Invoke, or the handler's own exception,
    function_errors = {InputError.__name__}  # which Step Functions names by its errorType, the class's name
    return TASK_STATES_ERRORS | modeled("lambda", "Invoke", prefix) | documented | function_errors


def test_every_retry_and_catch_names_errors_its_task_can_raise(definition: dict):
    handled = 0
    for name, state in definition["States"].items():
        if state["Type"] != "Task":
            continue
        names = {e for rule in state.get("Retry", []) + state.get("Catch", []) for e in rule["ErrorEquals"]}
        assert names - raisable(state["Resource"]) == set(), name
        handled += len(names - TASK_STATES_ERRORS)
    assert handled >= 15  # the service errors are named, not only States.ALL


def test_every_aws_call_retries_its_throttling_error(definition: dict):
    throttled = {  # what throttling arrives as: botocore models no ThrottlingException for these operations
        "arn:aws:states:::aws-sdk:datasync:startTaskExecution": "DataSync.DataSyncException",
        "arn:aws:states:::aws-sdk:datasync:describeTaskExecution": "DataSync.DataSyncException",
        "arn:aws:states:::aws-sdk:sagemaker:describeEndpoint": "SageMaker.SageMakerException",
    }
    for name, state in definition["States"].items():
        resource = state.get("Resource", "")
        if resource.startswith("arn:aws:states:::sagemaker:"):
            throttled[resource] = "SageMaker.AmazonSageMakerException"
        if resource in throttled:
            retried = {e for rule in state["Retry"] for e in rule["ErrorEquals"]}
            assert throttled[resource] in retried, name
