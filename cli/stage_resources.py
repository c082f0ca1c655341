"""What a stage's workflow leaves in the account, found by the stage's name prefix, and its removal in the order
AWS documents: ``python -m cli endpoints [--delete]`` and ``python -m cli teardown [--stop]`` (``make destroy``).

The workflow's jobs, models and endpoint run in the stack's subnets with the jobs' security group: while a network
interface of theirs exists, CloudFormation cannot delete the group or the subnets (DependencyViolation, the stack
DELETE_FAILED), and a job still running would lose its role under it. So ``teardown``: refuses while an execution or
job of the stage runs (``--stop`` stops them: StopExecution, which stops the execution's running job as its
``.sync`` integration does, then StopTrainingJob/StopProcessingJob for any other, and waits until none is
InProgress or Stopping); deletes the endpoint, and only once it is gone its configurations (SageMaker: an
endpoint configuration in use must not be deleted), then the models; then waits until the security group has no
network interface left (SageMaker deletes a job's or endpoint's interfaces after it ends, in minutes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from cli.errors import CommandError
from cli.stage import stack_output, stack_outputs, stage_config
from cli.start import STATE_MACHINE_OUTPUT
from infra.instances import INSTANCE_TYPES

JOB_KINDS = {"training": "TrainingJob", "processing": "ProcessingJob"}
RUNNING = ("InProgress", "Stopping")
HOURS_A_MONTH = 730
POLL_SECONDS = 15
INTERFACE_WAIT_SECONDS = 45 * 60  # SageMaker's interfaces go minutes after their job or endpoint; then give up


class StageResources:
    """The stage's SageMaker resources and executions (names beginning ``gpt-<stage>-``), and their removal."""

    def __init__(
        self, session: Any, stage: str, out: Callable[[str], None] = print, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.stage, self.prefix = stage, f"{stage_config(stage).job_prefix}-"
        self.session, self.out, self.sleep = session, out, sleep
        self.sagemaker = session.client("sagemaker")

    def _listed(self, operation: str, key: str, name: str, **request: Any) -> list[dict]:
        found = []
        for page in self.sagemaker.get_paginator(operation).paginate(NameContains=self.prefix, **request):
            found += [item for item in page[key] if item[name].lower().startswith(self.prefix)]
        return found

    def endpoints(self) -> list[dict]:
        return self._listed("list_endpoints", "Endpoints", "EndpointName")

    def endpoint_configs(self) -> list[str]:
        configs = self._listed("list_endpoint_configs", "EndpointConfigs", "EndpointConfigName")
        return [c["EndpointConfigName"] for c in configs]

    def models(self) -> list[str]:
        return [m["ModelName"] for m in self._listed("list_models", "Models", "ModelName")]

    def running_jobs(self) -> list[tuple[str, str]]:
        """(kind, name) of the stage's jobs InProgress or Stopping."""
        jobs = []
        for kind, shape in JOB_KINDS.items():
            for status in RUNNING:
                listed = self._listed(f"list_{kind}_jobs", f"{shape}Summaries", f"{shape}Name", StatusEquals=status)
                jobs += [(kind, job[f"{shape}Name"]) for job in listed]
        return jobs

    def describe_endpoints(self) -> list[str]:
        """One line per endpoint: status, instances, what it costs at the estimate's on-demand price."""
        lines = []
        for endpoint in self.endpoints():
            name = endpoint["EndpointName"]
            described = self.sagemaker.describe_endpoint(EndpointName=name)
            serving = described.get("ProductionVariants", [])
            counts = {v["VariantName"]: v.get("CurrentInstanceCount", 0) for v in serving}
            config = described.get("EndpointConfigName")  # names its variants' instance types
            if config is None:
                lines.append(f"{name}: {described['EndpointStatus']} (no configuration described)")
                continue
            variants = self.sagemaker.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"]
            fleet = [(counts.get(v["VariantName"], 0), v.get("InstanceType", "?")) for v in variants]
            dollars = sum(n * INSTANCE_TYPES[t].price_per_hour for n, t in fleet if t in INSTANCE_TYPES) * HOURS_A_MONTH
            shown = ", ".join(f"{n} x {t}" for n, t in fleet) or "no instances"
            lines.append(
                f"{name}: {described['EndpointStatus']}, {shown}, config {config}"
                f" (about ${dollars:,.0f} a month on demand, modelled at the estimate's prices)"
            )
        return lines

    def delete_hosting(self) -> None:
        """Endpoints first, each waited for until gone; then every configuration; then every model."""
        endpoints = [e["EndpointName"] for e in self.endpoints()]
        for name in endpoints:
            self.out(f"Deleting endpoint {name} ...")
            self.sagemaker.delete_endpoint(EndpointName=name)
        for name in endpoints:
            while self._endpoint_exists(name):
                self.sleep(POLL_SECONDS)
        for name in self.endpoint_configs():
            self.out(f"Deleting endpoint configuration {name}")
            self.sagemaker.delete_endpoint_config(EndpointConfigName=name)
        for name in self.models():
            self.out(f"Deleting model {name}")
            self.sagemaker.delete_model(ModelName=name)

    def _endpoint_exists(self, name: str) -> bool:
        try:
            self.sagemaker.describe_endpoint(EndpointName=name)
        except ClientError as error:  # "Could not find endpoint": it is gone
            if error.response.get("Error", {}).get("Code") == "ValidationException":
                return False
            raise
        return True


def teardown(session: Any, stage: str, stop: bool, resources: StageResources | None = None) -> None:
    """Leaves nothing of the stage's workflow that holds the stack's network; raises CommandError where it will not."""
    resources = resources or StageResources(session, stage)
    out, stack = resources.out, stage_config(stage).stack_name
    try:
        outputs = stack_outputs(session, stage)
    except ClientError as error:
        if "does not exist" in str(error):
            out(f"Stack {stack} is not deployed: nothing to tear down.")
            return
        raise
    machine = stack_output(outputs, STATE_MACHINE_OUTPUT, stage)
    sfn = session.client("stepfunctions")
    executions = [
        e["executionArn"]
        for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=machine, statusFilter="RUNNING")
        for e in page["executions"]
    ]
    jobs = resources.running_jobs()
    if (executions or jobs) and not stop:
        names = ", ".join([a.rsplit(":", 1)[-1] for a in executions] + [name for _, name in jobs])
        raise CommandError(
            f"stage {stage} is running {len(executions)} execution(s) and {len(jobs)} job(s) ({names}): destroying "
            "now would delete their role and network under them. Wait for them, or stop them first: make destroy "
            f"STAGE={stage} STOP=1 (training checkpoints the step in flight)"
        )
    for arn in executions:
        out(f"Stopping execution {arn.rsplit(':', 1)[-1]} (its running job stops with it)")
        sfn.stop_execution(executionArn=arn, error="Stopped", cause="stopped by python -m cli teardown")
    _stop_jobs(resources)
    resources.delete_hosting()
    _wait_for_interfaces(session, stack, resources)
    out(f"Nothing of stage {stage}'s workflow holds its network any more: cdk destroy can delete {stack}.")


def _stop_jobs(resources: StageResources) -> None:
    """Stops the stage's jobs still InProgress and waits until none is InProgress or Stopping."""
    stop = {"training": "stop_training_job", "processing": "stop_processing_job"}
    for kind, name in resources.running_jobs():
        try:
            getattr(resources.sagemaker, stop[kind])(**{f"{JOB_KINDS[kind]}Name": name})
            resources.out(f"Stopping {kind} job {name}")
        except ClientError as error:  # already stopping, or ended since it was listed
            if error.response.get("Error", {}).get("Code") != "ValidationException":
                raise
    while resources.running_jobs():
        resources.sleep(POLL_SECONDS)


def _wait_for_interfaces(session: Any, stack: str, resources: StageResources) -> None:
    """Until no network interface is in the stack's jobs security group (the stack's other groups hold only what
    CloudFormation deletes itself: mount targets, DataSync's locations, interface endpoints)."""
    listed = session.client("cloudformation").get_paginator("list_stack_resources").paginate(StackName=stack)
    groups = [
        r["PhysicalResourceId"]
        for page in listed
        for r in page["StackResourceSummaries"]
        if r["ResourceType"] == "AWS::EC2::SecurityGroup" and r["LogicalResourceId"].startswith("NetworkJobsSecurity")
    ]
    if not groups:
        return
    ec2, waited = session.client("ec2"), 0.0
    while True:
        pages = ec2.get_paginator("describe_network_interfaces").paginate(
            Filters=[{"Name": "group-id", "Values": groups}]
        )
        interfaces = [i for page in pages for i in page["NetworkInterfaces"]]
        if not interfaces:
            return
        if waited >= INTERFACE_WAIT_SECONDS:
            shown = ", ".join(f"{i['NetworkInterfaceId']} ({i.get('Description', '')})" for i in interfaces)
            raise CommandError(
                f"{len(interfaces)} network interface(s) still in {groups[0]} after {waited / 60:.0f} min: {shown}; "
                "delete them (aws ec2 delete-network-interface) or run this again, then destroy"
            )
        resources.out(f"Waiting for {len(interfaces)} network interface(s) of SageMaker to be deleted ...")
        resources.sleep(POLL_SECONDS)
        waited += POLL_SECONDS
