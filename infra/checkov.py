"""checkov skips, written into the template where a check cannot apply (tests/test_security.py runs checkov).

checkov reads ``Metadata.checkov.skip: [{id, comment}]`` on a resource. A skip is for a check that cannot
apply to that resource; a real gap is fixed instead. Every skip carries a one-line reason for reviewers.
"""

from __future__ import annotations

import re

import aws_cdk as cdk
import jsii
from constructs import IConstruct

# CDK's singleton custom-resource providers (S3 AutoDeleteObjects, VPC RestrictDefaultSG) are Lambda
# functions that aws-cdk-lib builds itself: their DLQ, VPC and concurrency cannot be configured.
CDK_PROVIDER_HANDLER = re.compile(r"/Custom::\w+CustomResourceProvider/Handler$")
CDK_PROVIDER_REASONS = {
    "CKV_AWS_116": "CDK's custom-resource provider, invoked only by CloudFormation during deployment, which "
    "reports its failures as stack events; a DLQ would hold events nobody replays, and CDK offers none.",
    "CKV_AWS_117": "CDK's custom-resource provider calls only AWS APIs (EC2 or S3) during deployment and touches "
    "no data plane; CDK offers no VPC setting for it.",
    "CKV_AWS_115": "CDK's custom-resource provider runs once per deployment; CDK offers no concurrency setting, "
    "and a reservation would only take capacity from the account's pool.",
}


def skip_checks(construct: IConstruct, reasons: dict[str, str]) -> None:
    """Skips checkov checks on ``construct``'s CloudFormation resource.

    Args:
        construct: an L1 resource or an L2 construct (its default child is used).
        reasons: check id (``CKV_AWS_21``) -> why the check cannot apply here.
    """
    resource = construct if isinstance(construct, cdk.CfnResource) else construct.node.default_child
    if not isinstance(resource, cdk.CfnResource):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource to carry a checkov skip")
    existing = (resource.get_metadata("checkov") or {}).get("skip", [])
    skips = [s for s in existing if s["id"] not in reasons]
    skips += [{"id": check, "comment": comment} for check, comment in sorted(reasons.items())]
    resource.add_metadata("checkov", {"skip": skips})


@jsii.implements(cdk.IAspect)
class SkipChecksOnCdkProviders:
    """Adds ``CDK_PROVIDER_REASONS`` to the Lambda functions of CDK's own custom-resource providers.

    These functions are created inside aws-cdk-lib (they have no construct to configure); they are
    recognised by resource type and construct path, ``<stack>/Custom::<Name>CustomResourceProvider/Handler``.
    """

    def visit(self, node: IConstruct) -> None:
        if (
            isinstance(node, cdk.CfnResource)
            and node.cfn_resource_type == "AWS::Lambda::Function"
            and CDK_PROVIDER_HANDLER.search(node.node.path)
        ):
            skip_checks(node, CDK_PROVIDER_REASONS)
