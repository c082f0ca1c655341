"""cdk-nag's packs on every synth (the stage's ``security.compliance_packs``), and the one way this project
acknowledges a finding."""

from __future__ import annotations

import functools
from collections.abc import Iterable

import aws_cdk as cdk
import cdk_nag
from aws_cdk import aws_iam as iam
from constructs import IConstruct

from infra.config import COMPLIANCE_PACKS

PACKS: dict[str, type[cdk_nag.NagPack]] = {name: getattr(cdk_nag, f"{name}Checks") for name in COMPLIANCE_PACKS}
COMPLIANCE = tuple(name for name in COMPLIANCE_PACKS if name != "AwsSolutions")  # the packs beyond it
INLINE_POLICY_REASON = (
    "An AWS::IAM::Policy attached to this one role and deleted with it: IAM's guide names inline policies for a "
    "strict one-to-one relationship between a policy and its identity, which a managed policy (attachable "
    "anywhere) does not keep. Every statement is reviewed in SECURITY.md and tests/iam_reviewed.py; the tests "
    "fail on any other."
)


def enable_nag(app: cdk.App, packs: Iterable[str]) -> None:
    """Runs the named packs on every stack of ``app``; an unacknowledged finding of any fails synthesis.

    Acknowledged findings are also written to each resource's CloudFormation metadata
    (``cdk_nag.rules_to_suppress``) so reviewers see them in the template.

    Args:
        packs: names from ``COMPLIANCE_PACKS`` (validated by the configuration).
    """
    plugins = [PACKS[name](app, write_suppressions_to_cloud_formation=i == 0) for i, name in enumerate(packs)]
    cdk.Validations.of(app).add_plugins(*plugins)


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


def acknowledge_compliance(scope: IConstruct, reasons: dict[str, str], packs: Iterable[str] = COMPLIANCE) -> None:
    """Acknowledges a rule of the compliance packs on ``scope``; the packs share rule names.

    Args:
        reasons: the rule without its pack's prefix (``S3BucketReplicationEnabled``) -> why.
        packs: the packs that check the rule (not every rule is in every pack, e.g. PCI DSS has no LambdaDLQ).
    """
    prefixes = [rule_prefix(name) for name in packs]
    acknowledge(scope, {f"{p}::{p}-{rule}": why for rule, why in reasons.items() for p in prefixes})


@functools.cache
def rule_prefix(pack: str) -> str:
    """The pack's name in its rule ids and reports, e.g. ``NIST.800.53.R5`` for NIST80053R5."""
    return PACKS[pack]().name


def acknowledge_inline_policies(scope: IConstruct) -> None:
    """Acknowledges IAMNoInlinePolicy on every role policy below ``scope`` (none is attached to a user or group)."""
    for node in scope.node.find_all():
        if isinstance(node, iam.CfnPolicy) and not any(map(cdk.Stack.of(node).resolve, (node.users, node.groups))):
            acknowledge_compliance(node, {"IAMNoInlinePolicy": INLINE_POLICY_REASON})


def cfn_ref(construct: IConstruct, attribute: str = "Arn") -> str:
    """How cdk-nag writes a resource's attribute in a finding: ``<LogicalId.Arn>``."""
    resource = construct if isinstance(construct, cdk.CfnElement) else construct.node.default_child
    return f"<{cdk.Stack.of(construct).get_logical_id(resource)}.{attribute}>"


def bucket_ref(bucket) -> str:
    """A bucket's ARN as cdk-nag writes it: ``<LogicalId.Arn>``, or the ARN of a bucket imported by name."""
    if bucket.node.default_child is None:
        return cdk.Stack.of(bucket).resolve(bucket.bucket_arn)  # e.g. arn:aws:s3:::my-corpora
    return cfn_ref(bucket)
