"""cdk-nag's AwsSolutions checks on every synth, and the one way this project acknowledges a finding."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def enable_nag(app: cdk.App) -> None:
    """Runs AwsSolutions on every stack of ``app``; an unacknowledged finding fails synthesis.

    Acknowledged findings are also written to each resource's CloudFormation metadata
    (``cdk_nag.rules_to_suppress``) so reviewers see them in the template.
    """
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, write_suppressions_to_cloud_formation=True))


def acknowledge(scope: IConstruct, reasons: dict[str, str]) -> None:
    """Acknowledges findings on ``scope`` and everything below it.

    Args:
        reasons: finding id -> why it is acceptable here, e.g.
            ``{"AwsSolutions-IAM5[Resource::*]": "ecr:GetAuthorizationToken has no resource-level permission"}``.
    """
    for finding, reason in reasons.items():
        cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=finding, reason=reason))


def acknowledge_wildcards(scope: IConstruct, reasons: dict[str, str]) -> None:
    """Acknowledges AwsSolutions-IAM5 findings (one per wildcard resource or action) on ``scope``.

    Args:
        reasons: the finding's subject (``Resource::<arn pattern>`` or ``Action::<action>``) -> why.
    """
    acknowledge(scope, {f"AwsSolutions::AwsSolutions-IAM5[{subject}]": why for subject, why in reasons.items()})


def cfn_ref(construct: IConstruct, attribute: str = "Arn") -> str:
    """How cdk-nag writes a resource's attribute in a finding: ``<LogicalId.Arn>``."""
    resource = construct if isinstance(construct, cdk.CfnElement) else construct.node.default_child
    return f"<{cdk.Stack.of(construct).get_logical_id(resource)}.{attribute}>"


def bucket_ref(bucket) -> str:
    """A bucket's ARN as cdk-nag writes it: ``<LogicalId.Arn>``, or the ARN of a bucket imported by name."""
    if bucket.node.default_child is None:
        return cdk.Stack.of(bucket).resolve(bucket.bucket_arn)  # e.g. arn:aws:s3:::my-corpora
    return cfn_ref(bucket)
