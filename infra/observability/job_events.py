"""E-mails when a SageMaker job of this stack fails, from SageMaker's job state-change events.

The workflow's own failure notice names the execution; this one names the job and SageMaker's reason,
and also covers jobs started outside the workflow with the stack's name prefix.
"""

from __future__ import annotations

import jsii
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.notifications import Notifications

JOB_KINDS = ("Training", "Processing")
CONSOLE_PAGES = {"Training": "jobs", "Processing": "processing-jobs"}  # SageMaker console: #/<page>/<job name>


def failed_job_pattern(kind: str, job_prefix: str) -> events.EventPattern:
    """``SageMaker <kind> Job State Change`` events of failed jobs whose name starts with ``<job_prefix>-``."""
    return events.EventPattern(
        source=["aws.sagemaker"],
        detail_type=[f"SageMaker {kind} Job State Change"],
        detail={f"{kind}JobStatus": ["Failed"], f"{kind}JobName": [{"prefix": f"{job_prefix}-"}]},
    )


@jsii.implements(events.IRuleTarget)
class PublishAsRole:
    """A rule target that publishes ``message`` to a topic as ``role``.

    CDK's ``targets.SnsTopic`` does the same but also grants the role ``kms:GenerateDataKey*`` through
    ``Topic.grant_publish``; this one leaves the role's permissions to ``Notifications.grant_publish``.
    """

    def __init__(self, topic_arn: str, role: iam.IRole, message: events.RuleTargetInput) -> None:
        self._topic_arn, self._role, self._message = topic_arn, role, message

    def bind(self, rule: events.IRule, id: str | None = None) -> events.RuleTargetConfig:
        return events.RuleTargetConfig(arn=self._topic_arn, role=self._role, input=self._message)


class JobFailureNotifications(Construct):
    """One EventBridge rule per job kind (training, processing), each publishing a short message to the topic.

    Args:
        job_prefix: the start of every job name of this stack (``gpt-<stage>``).
        notifications: the topic; the rules publish through one role of their own (not a topic policy open
            to any rule), which may publish to that topic and use its key only through SNS.
    """

    def __init__(self, scope: Construct, id: str, *, job_prefix: str, notifications: Notifications) -> None:
        super().__init__(scope, id)
        self.role = iam.Role(
            self,
            "PublishRole",
            assumed_by=iam.ServicePrincipal("events.amazonaws.com"),
            description=f"EventBridge rules announcing failed {job_prefix}-* jobs to the notification topic",
        )
        notifications.grant_publish(self.role)
        self.rules: list[events.Rule] = []
        for kind in JOB_KINDS:
            name = events.EventField.from_path(f"$.detail.{kind}JobName")
            reason = events.EventField.from_path("$.detail.FailureReason")
            region = events.EventField.region
            rule = events.Rule(
                self,
                f"{kind}JobFailed",
                description=f"{kind} jobs {job_prefix}-* that fail",
                event_pattern=failed_job_pattern(kind, job_prefix),
            )
            message = events.RuleTargetInput.from_text(
                f"SageMaker {kind.lower()} job {name} failed: {reason}. Logs and details: "
                f"https://{region}.console.aws.amazon.com/sagemaker/home?region={region}"
                f"#/{CONSOLE_PAGES[kind]}/{name}"
            )
            rule.add_target(PublishAsRole(notifications.topic.topic_arn, self.role, message))
            self.rules.append(rule)
