"""A training job waiting for capacity tells a person: the watchdog function, its schedule and its alarm.

While a spot job waits (MaxWait allows ``training.spot_wait_hours`` of it) nothing of the job reports, so the
health alarms, which treat missing data as fine, stay silent for as long as it waits. The watchdog
(``capacity_watch.py``) measures the longest wait every 15 minutes; the alarm e-mails the topic when it passes
``observability.capacity_wait_alarm_hours``, and also when the watchdog stops reporting (missing data breaches).
"""

from __future__ import annotations

import shutil

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.checkov import skip_checks
from infra.nag import acknowledge_compliance, acknowledge_wildcards, cfn_ref
from infra.observability import capacity_watch
from infra.source_bundle import BUILD_DIR
from infra.workflow.permissions import sagemaker_arn

EVERY = cdk.Duration.minutes(15)
PERIODS = 2  # consecutive 15-minute periods over the threshold (or without a report) before it fires
NO_DLQ = (
    "Invoked by its schedule every 15 minutes; a failed invocation publishes no datapoint, and the alarm treats "
    "missing data as breaching, so a failing watchdog e-mails the topic itself. A DLQ would hold only the events."
)
NOT_IN_VPC = (
    "It calls only SageMaker's ListTrainingJobs and DescribeTrainingJob (and writes its log); in a VPC it would "
    "need ENI permissions on '*', and an isolated stage a SageMaker API endpoint."
)
UNRESERVED = (
    "One invocation every 15 minutes, from its schedule only: a reservation would only take unreserved concurrency "
    "from the account (Lambda keeps at least 10 unreserved, and new accounts may have only 10)."
)


class CapacityWatch(Construct):
    """A scheduled function that measures the longest capacity wait of ``job_prefix``'s training jobs, and an
    alarm on it that e-mails ``topic``.

    Args:
        job_prefix: the stage's job-name prefix (jobs are ``<job_prefix>-...``).
        alarm_hours: the wait, in hours, at which the alarm fires.
        log_group: the function's log group (encrypted, with retention); its log lines carry the metric.
        topic: where the alarm goes (CloudWatch's right to publish to it is ``alarms.py``'s).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        job_prefix: str,
        alarm_hours: int,
        log_group: logs.ILogGroup,
        topic: sns.ITopic,
    ) -> None:
        super().__init__(scope, id)
        code = BUILD_DIR / "capacity_watch" / cdk.Stack.of(self).stack_name
        shutil.rmtree(code, ignore_errors=True)
        code.mkdir(parents=True)
        shutil.copyfile(capacity_watch.__file__, code / "capacity_watch.py")
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="capacity_watch.handler",
            code=lambda_.Code.from_asset(str(code)),
            timeout=cdk.Duration.minutes(1),
            memory_size=128,
            role=role,
            log_group=log_group,
            description="How long the stage's training jobs have waited for capacity",
        )
        log_group.grant_write(role)
        role.add_to_policy(iam.PolicyStatement(actions=["sagemaker:ListTrainingJobs"], resources=["*"]))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["sagemaker:DescribeTrainingJob"], resources=[sagemaker_arn(job_prefix, "training-job")]
            )
        )
        events.Rule(
            self,
            "Schedule",
            schedule=events.Schedule.rate(EVERY),
            targets=[
                targets.LambdaFunction(
                    self.function, event=events.RuleTargetInput.from_object({"job_prefix": job_prefix})
                )
            ],
        )
        self.alarm = cw.Alarm(
            self,
            "Alarm",
            metric=cw.Metric(
                namespace=capacity_watch.NAMESPACE,
                metric_name=capacity_watch.METRIC,
                dimensions_map={"JobPrefix": job_prefix},
                statistic="Maximum",
                period=EVERY,
            ),
            threshold=alarm_hours,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=PERIODS,
            datapoints_to_alarm=PERIODS,
            treat_missing_data=cw.TreatMissingData.BREACHING,
            alarm_description=(
                f"A training job of {job_prefix} has waited {alarm_hours} h or more for capacity (Starting, Pending "
                "or Interrupted: no host working), or the capacity watchdog stopped reporting (its log group says "
                "why). docs/runbook.md, 'A spot job waits for capacity'."
            ),
        )
        self.alarm.add_alarm_action(actions.SnsAction(topic))
        skip_checks(self.function, {"CKV_AWS_116": NO_DLQ, "CKV_AWS_117": NOT_IN_VPC, "CKV_AWS_115": UNRESERVED})
        acknowledge_compliance(self.function, {"LambdaInsideVPC": NOT_IN_VPC})
        acknowledge_compliance(
            self.function,
            {"LambdaDLQ": NO_DLQ, "LambdaConcurrency": UNRESERVED},
            packs=("NIST80053R5", "HIPAASecurity"),
        )
        jobs = f"arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/{job_prefix}-*"
        acknowledge_wildcards(
            role,
            {
                "Resource::*": "sagemaker:ListTrainingJobs has no resource-level permission (read-only).",
                f"Resource::{jobs}": (
                    "It describes only the stage's training jobs, whose names are derived per execution."
                ),
                f"Resource::{cfn_ref(log_group)}:*": (
                    "Lambda names log streams per instance; writes are limited to the function's own log group."
                ),
            },
        )
