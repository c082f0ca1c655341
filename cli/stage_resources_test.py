"""make destroy's first step and the endpoints command, against stubbed AWS APIs (botocore's Stubber holds every
request and answer to the service's model): the order AWS documents, and a refusal while anything runs."""

from __future__ import annotations

import datetime

import pytest
from botocore.stub import Stubber

from cli.conftest import MACHINE, STACK, StubbedSession
from cli.errors import CommandError
from cli.stage_resources import StageResources, teardown

NOW = datetime.datetime(2026, 12, 1)
PREFIX = {"NameContains": "gpt-dev-"}
ENDPOINT = "gpt-dev-endpoint"
EXECUTION = f"{MACHINE.replace('stateMachine', 'execution')}:nightly"
SG = "sg-0123456789abcdef0"


class Recorded(StubbedSession):
    """Every call of every client, in the order made (``service.Operation``)."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def client(self, name):
        if name not in self.clients:
            super().client(name)
            record = lambda model, **_: self.calls.append(f"{name}.{model.name}")  # noqa: E731
            self.clients[name].meta.events.register_first("before-call.*.*", record)
        return self.clients[name]


def jobs(stub: Stubber, training: list[str] = (), processing: list[str] = ()) -> None:
    """One check of the running jobs: training and processing, InProgress and Stopping."""
    for kind, shape, names in (("training", "TrainingJob", training), ("processing", "ProcessingJob", processing)):
        for status in ("InProgress", "Stopping"):
            summaries = [
                {f"{shape}Name": n, f"{shape}Arn": f"arn:aws:sagemaker:us-east-1:1:{kind}-job/{n}",
                 "CreationTime": NOW, f"{shape}Status": status}
                for n in (names if status == "InProgress" else [])
            ]  # fmt: skip
            stub.add_response(f"list_{kind}_jobs", {f"{shape}Summaries": summaries}, {**PREFIX, "StatusEquals": status})


def hosting(stub: Stubber, endpoints: list[str], configs: list[str], models: list[str]) -> None:
    described = [
        {"EndpointName": e, "EndpointArn": f"arn:aws:sagemaker:us-east-1:1:endpoint/{e}", "CreationTime": NOW,
         "LastModifiedTime": NOW, "EndpointStatus": "InService"}
        for e in endpoints
    ]  # fmt: skip
    stub.add_response("list_endpoints", {"Endpoints": described}, PREFIX)
    for e in endpoints:
        stub.add_response("delete_endpoint", {}, {"EndpointName": e})
    for e in described:
        stub.add_response("describe_endpoint", {**e, "EndpointStatus": "Deleting"}, {"EndpointName": e["EndpointName"]})
        stub.add_client_error("describe_endpoint", "ValidationException", f'Could not find endpoint "{e}".')
    listed = [{"EndpointConfigName": c, "EndpointConfigArn": f"arn:aws:sagemaker:::c/{c}", "CreationTime": NOW}
              for c in configs]  # fmt: skip
    stub.add_response("list_endpoint_configs", {"EndpointConfigs": listed}, PREFIX)
    for c in configs:
        stub.add_response("delete_endpoint_config", {}, {"EndpointConfigName": c})
    models_listed = [{"ModelName": m, "ModelArn": f"arn:aws:sagemaker:::m/{m}", "CreationTime": NOW} for m in models]
    stub.add_response("list_models", {"Models": models_listed}, PREFIX)
    for m in models:
        stub.add_response("delete_model", {}, {"ModelName": m})


def network(session: Recorded, interfaces: list[int]) -> None:
    """The stack's jobs security group, and the interfaces in it at each look."""
    resources = [
        {"LogicalResourceId": "NetworkJobsSecurityGroup0EBE04F4", "PhysicalResourceId": SG,
         "ResourceType": "AWS::EC2::SecurityGroup", "LastUpdatedTimestamp": NOW, "ResourceStatus": "CREATE_COMPLETE"},
    ]  # fmt: skip
    session.stub("cloudformation").add_response(
        "list_stack_resources", {"StackResourceSummaries": resources}, {"StackName": STACK}
    )
    for count in interfaces:
        found = [{"NetworkInterfaceId": f"eni-{i:017x}", "Description": "SageMaker"} for i in range(count)]
        filters = {"Filters": [{"Name": "group-id", "Values": [SG]}]}
        session.stub("ec2").add_response("describe_network_interfaces", {"NetworkInterfaces": found}, filters)


def running(session: Recorded, executions: list[str]) -> None:
    session.stack()
    listed = [{"executionArn": a, "stateMachineArn": MACHINE, "name": a.rsplit(":", 1)[-1], "status": "RUNNING",
               "startDate": NOW} for a in executions]  # fmt: skip
    session.stub("stepfunctions").add_response(
        "list_executions", {"executions": listed}, {"stateMachineArn": MACHINE, "statusFilter": "RUNNING"}
    )


def resources(session: Recorded, lines: list[str]) -> StageResources:
    return StageResources(session, "dev", out=lines.append, sleep=lambda seconds: None)


def test_teardown_refuses_while_an_execution_or_a_job_runs_and_deletes_nothing():
    session, lines = Recorded(), []
    running(session, [EXECUTION])
    jobs(session.stub("sagemaker"), training=["gpt-dev-nightly-abc123-trn"])
    with pytest.raises(CommandError, match=r"stage dev is running 1 execution\(s\) and 1 job\(s\) \(nightly, "
                       r"gpt-dev-nightly-abc123-trn\): destroying now .* make destroy STAGE=dev STOP=1"):  # fmt: skip
        teardown(session, "dev", stop=False, resources=resources(session, lines))
    assert not [c for c in session.calls if ".Stop" in c or ".Delete" in c]
    session.assert_done()


def test_teardown_stops_then_deletes_the_endpoint_before_its_configuration_then_waits_for_the_interfaces():
    session, lines = Recorded(), []
    running(session, [EXECUTION])
    sagemaker = session.stub("sagemaker")
    jobs(sagemaker, processing=["gpt-dev-manual-shd"])  # before stopping: a job the execution did not start
    session.stub("stepfunctions").add_response(
        "stop_execution", {"stopDate": NOW}, {"executionArn": EXECUTION, "error": "Stopped",
                                              "cause": "stopped by python -m cli teardown"}
    )  # fmt: skip
    jobs(sagemaker, processing=["gpt-dev-manual-shd"])
    sagemaker.add_response("stop_processing_job", {}, {"ProcessingJobName": "gpt-dev-manual-shd"})
    jobs(sagemaker, processing=["gpt-dev-manual-shd"])  # still stopping
    jobs(sagemaker)
    hosting(sagemaker, [ENDPOINT], ["gpt-dev-a-epc", "gpt-dev-b-epc"], ["gpt-dev-a-mdl"])
    network(session, [2, 0])
    teardown(session, "dev", stop=True, resources=resources(session, lines))
    session.assert_done()
    order = [c for c in session.calls if not c.startswith(("sagemaker.List", "cloudformation.Describe"))]
    assert order == [
        "stepfunctions.ListExecutions",
        "stepfunctions.StopExecution",
        "sagemaker.StopProcessingJob",
        "sagemaker.DeleteEndpoint",
        "sagemaker.DescribeEndpoint",  # Deleting
        "sagemaker.DescribeEndpoint",  # gone: now its configurations may go
        "sagemaker.DeleteEndpointConfig",
        "sagemaker.DeleteEndpointConfig",
        "sagemaker.DeleteModel",
        "cloudformation.ListStackResources",
        "ec2.DescribeNetworkInterfaces",  # two left: wait
        "ec2.DescribeNetworkInterfaces",
    ]
    assert lines[-1] == f"Nothing of stage dev's workflow holds its network any more: cdk destroy can delete {STACK}."


def test_a_stack_not_deployed_has_nothing_to_tear_down():
    session, lines = Recorded(), []
    session.stub("cloudformation").add_client_error(
        "describe_stacks", "ValidationError", f"Stack with id {STACK} does not exist"
    )
    teardown(session, "dev", stop=False, resources=resources(session, lines))
    assert lines == [f"Stack {STACK} is not deployed: nothing to tear down."]


def test_the_endpoints_command_says_what_each_endpoint_costs():
    session, lines = Recorded(), []
    sagemaker = session.stub("sagemaker")
    endpoint = {"EndpointName": ENDPOINT, "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/gpt-dev-endpoint",
                "CreationTime": NOW, "LastModifiedTime": NOW, "EndpointStatus": "InService"}  # fmt: skip
    sagemaker.add_response("list_endpoints", {"Endpoints": [endpoint]}, PREFIX)
    serving = {"VariantName": "AllTraffic", "CurrentInstanceCount": 1}
    sagemaker.add_response(
        "describe_endpoint",
        {**endpoint, "EndpointConfigName": "gpt-dev-b-epc", "ProductionVariants": [serving]},
        {"EndpointName": ENDPOINT},
    )
    variant = {"VariantName": "AllTraffic", "InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 1}
    config = {"EndpointConfigName": "gpt-dev-b-epc", "EndpointConfigArn": "arn:aws:sagemaker:::c/b",
              "ProductionVariants": [variant], "CreationTime": NOW}  # fmt: skip
    sagemaker.add_response("describe_endpoint_config", config, {"EndpointConfigName": "gpt-dev-b-epc"})
    (line,) = resources(session, lines).describe_endpoints()
    assert line.startswith("gpt-dev-endpoint: InService, 1 x ml.g5.xlarge, config gpt-dev-b-epc (about $1,")
