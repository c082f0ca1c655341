"""E-mails when a SageMaker job of this stack fails, from SageMaker's job state-change events.

The workflow's own failure notice names the execution; this one names the job and SageMaker's reason,
and also covers jobs started outside the workflow with the stack's name prefix.
"""

from __future__ import annotations

from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.nag import acknowledge_wildcards

JOB_KINDS = ("Training", "Processing")
KMS_PUBLISH_REASON = (
    "Publishing to the KMS-encrypted topic needs data keys from its one key (GenerateDataKey and "
    "GenerateDataKeyWithoutPlaintext); CDK's Topic.grant_publish scopes this to that key's ARN."
)
CONSOLE_PAGES = {"Training": "jobs", "Processing": "processing-jobs"}  # SageMaker console: #/<page>/<job name>


def failed_job_pattern(kind: str, job_prefix: str) -> events.EventPattern:
    """``SageMaker <kind> Job State Change`` events of failed jobs whose name starts with ``<job_prefix>-``."""
    return events.EventPattern(
        source=["aws.sagemaker"],
        detail_type=[f"SageMaker {kind} Job State Change"],
        detail={f"{kind}JobStatus": ["Failed"], f"{kind}JobName": [{"prefix": f"{job_prefix}-"}]},
    )


class JobFailureNotifications(Construct):
    """One EventBridge rule per job kind (training, processing), each publishing a short message to ``topic``.

    Args:
        job_prefix: the start of every job name of this stack (``gpt-<stage>``).
        topic: where the message goes; each rule publishes through a role of its own, which CDK grants
            ``sns:Publish`` and the use of the topic's KMS key.
    """

    def __init__(self, scope: Construct, id: str, *, job_prefix: str, topic: sns.ITopic) -> None:
        super().__init__(scope, id)
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
            rule.add_target(
                targets.SnsTopic(
                    topic,
                    authorize_using_role=True,  # a role of this rule's, not a topic policy open to any rule
                    message=events.RuleTargetInput.from_text(
                        f"SageMaker {kind.lower()} job {name} failed: {reason}. Logs and details: "
                        f"https://{region}.console.aws.amazon.com/sagemaker/home?region={region}"
                        f"#/{CONSOLE_PAGES[kind]}/{name}"
                    ),
                )
            )
            self.rules.append(rule)
        acknowledge_wildcards(self, {"Action::kms:GenerateDataKey*": KMS_PUBLISH_REASON})
