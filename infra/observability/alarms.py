"""The workflow's alarms: an execution failed or timed out (on the dashboard; the workflow's own NotifyFailure
e-mails each failure, with its cause, once), EFS throughput near its limit (e-mailed to the stack's topic)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.nag import acknowledge_compliance
from infra.notifications import admit_service
from infra.observability import efs_metrics

EFS_PERIOD = cdk.Duration.minutes(1)
ANNOUNCED_BY_THE_WORKFLOW = (
    "Every failure path of the workflow ends in its NotifyFailure state, which e-mails the stack's topic the "
    "execution, the error and its cause once; an alarm action here would e-mail each failure a second time saying "
    "less. The alarm stays for its state on the dashboard."
)
EFS_MINUTES = 5  # consecutive minutes above the threshold before the alarm fires


class WorkflowAlarms(Construct):
    """CloudWatch alarms; the EFS alarm has the topic as its alarm action.

    Args:
        state_machine: the workflow; any failed or timed-out execution alarms (one minute, no waiting), without an
            action: every failure path of the workflow ends in NotifyFailure, whose e-mail names the execution, the
            error and its cause, and a second e-mail saying less would only double each one.
        file_system_id: the datasets file system.
        topic: where alarms are sent; encrypted topics get a key grant for CloudWatch.
        key: the topic's KMS key (default none: an unencrypted topic).
        efs_throughput_percent: EFS alarm threshold, % of permitted throughput (default 80).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        state_machine: sfn.IStateMachine,
        file_system_id: str,
        topic: sns.ITopic,
        key: kms.IKey | None = None,
        efs_throughput_percent: int = 80,
    ) -> None:
        super().__init__(scope, id)
        minute = cdk.Duration.minutes(1)
        self.execution_failed = self._any(
            "ExecutionFailed", state_machine.metric_failed(period=minute), "A workflow execution failed"
        )
        self.execution_timed_out = self._any(
            "ExecutionTimedOut", state_machine.metric_timed_out(period=minute), "A workflow execution timed out"
        )
        self.efs_throughput = cw.Alarm(
            self,
            "EfsThroughputNearLimit",
            metric=efs_metrics.throughput_percent(file_system_id, EFS_PERIOD),
            threshold=efs_throughput_percent,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=EFS_MINUTES,
            datapoints_to_alarm=EFS_MINUTES,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"EFS throughput above {efs_throughput_percent}% of its permitted throughput for {EFS_MINUTES} "
                "minutes: training is likely waiting on input (see the dashboard's EFS row)."
            ),
        )
        self.alarms: list[cw.Alarm] = [self.execution_failed, self.execution_timed_out, self.efs_throughput]
        self.efs_throughput.add_alarm_action(actions.SnsAction(topic))
        for alarm in (self.execution_failed, self.execution_timed_out):
            acknowledge_compliance(
                alarm, {"CloudWatchAlarmAction": ANNOUNCED_BY_THE_WORKFLOW}, packs=("NIST80053R5", "HIPAASecurity")
            )
        _allow_cloudwatch_to_publish(topic, key)

    def _any(self, id: str, metric: cw.Metric, description: str) -> cw.Alarm:
        """Fires on the first occurrence in a minute."""
        return cw.Alarm(
            self,
            id,
            metric=metric.with_(statistic="Sum"),
            threshold=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"{description}; the execution's history says which state and why, and the failure e-mail (its "
                "NotifyFailure state) said so once already."
            ),
        )


def _allow_cloudwatch_to_publish(topic: sns.ITopic, key: kms.IKey | None) -> None:
    """The alarms of this account and region may publish to the (encrypted) topic."""
    stack = cdk.Stack.of(topic)
    alarms = f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:*"
    admit_service(topic, key, "cloudwatch.amazonaws.com", {"ArnLike": {"aws:SourceArn": alarms}})
