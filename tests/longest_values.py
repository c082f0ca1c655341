"""A template's values as they will be once deployed, each CloudFormation reference at its longest.

What AWS measures at deployment (Lambda's 4 KB environment) must hold for every name CloudFormation may
generate, so each ``Ref`` and ``Fn::GetAtt`` becomes the longest value of its kind that AWS allows (63
characters for a bucket name, 64 for a role's, 17 hex digits in an EC2 id) in the stage's partition, and the
stage's region is replaced by the longest one a stage may choose. The same values, ARN-shaped, let a test
match a policy's resources against the ARN formats of the Service Authorization Reference.
"""

from __future__ import annotations

import re
from typing import Any

from infra.config import PLACEHOLDER_ACCOUNT, REGIONS

REGION = max(REGIONS, key=len)
TEST_REGION = "us-east-1"  # the region the test stages synthesize for
PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": PLACEHOLDER_ACCOUNT,
    "AWS::Partition": "aws",  # every region in REGIONS is in it
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "s" * 128,
    "AWS::StackId": "arn:aws:cloudformation:${AWS::Region}:${AWS::AccountId}:stack/" + "s" * 128 + "/"
    "01234567-89ab-cdef-0123-456789abcdef",
}
HEX = "0123456789abcdef0"  # the 17 hex digits of an EC2 or EFS id
UUID = "01234567-89ab-cdef-0123-456789abcdef"


def arn(service: str, resource: str) -> str:
    return f"arn:${{AWS::Partition}}:{service}:${{AWS::Region}}:${{AWS::AccountId}}:{resource}"


# (resource type, attribute or None for Ref) -> the longest value, in Fn::Sub's syntax; names at the service's limit.
LONGEST = {
    ("AWS::S3::Bucket", None): "b" * 63,
    ("AWS::S3::Bucket", "Arn"): "arn:${AWS::Partition}:s3:::" + "b" * 63,
    ("AWS::IAM::Role", "Arn"): "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/" + "r" * 64,
    ("AWS::KMS::Key", None): UUID,
    ("AWS::KMS::Key", "Arn"): arn("kms", "key/") + UUID,
    ("AWS::EFS::FileSystem", None): "fs-" + HEX,
    ("AWS::EFS::FileSystem", "Arn"): arn("elasticfilesystem", "file-system/fs-") + HEX,
    ("AWS::EFS::AccessPoint", None): "fsap-" + HEX,
    ("AWS::EFS::AccessPoint", "Arn"): arn("elasticfilesystem", "access-point/fsap-") + HEX,
    ("AWS::EC2::Subnet", None): "subnet-" + HEX,
    ("AWS::EC2::SecurityGroup", "GroupId"): "sg-" + HEX,
    ("AWS::EC2::VPC", None): "vpc-" + HEX,
    ("AWS::EC2::VPC", "DefaultSecurityGroup"): "sg-" + HEX,
    ("AWS::Lambda::Function", "Arn"): arn("lambda", "function:") + "f" * 64,
    ("AWS::Logs::LogGroup", "Arn"): arn("logs", "log-group:") + "l" * 512 + ":*",
    ("AWS::SNS::Topic", None): arn("sns", "t" * 256),
    ("AWS::DataSync::Task", "TaskArn"): arn("datasync", "task/task-") + HEX,
    ("AWS::Events::Rule", "Arn"): arn("events", "rule/") + "r" * 64,
    ("AWS::StepFunctions::StateMachine", None): arn("states", "stateMachine:") + "m" * 80,
}


SUB_VARIABLE = re.compile(r"\$\{([^}!]+)\}")


class LongestValues:
    """Resolves a template's values with every reference at its longest (``value``)."""

    def __init__(self, template: dict[str, Any]) -> None:
        self.resources: dict[str, dict] = template["Resources"]

    def reference(self, logical_id: str, attribute: str | None) -> str:
        if logical_id in PSEUDO:
            return self.sub(PSEUDO[logical_id])
        kind = self.resources[logical_id]["Type"]
        if (kind, attribute) not in LONGEST:
            raise KeyError(f"no longest value for {kind} {attribute or 'Ref'} ({logical_id}); add it to LONGEST")
        return self.sub(LONGEST[kind, attribute])

    def sub(self, text: str) -> str:
        """``Fn::Sub``: each ``${Name}`` or ``${Name.Attribute}`` resolved."""
        return SUB_VARIABLE.sub(lambda m: self.reference(*(m[1].split(".", 1) if "." in m[1] else (m[1], None))), text)

    def value(self, value: Any) -> Any:
        """``value`` with its intrinsics resolved and the test region replaced by the longest one."""
        if isinstance(value, str):
            return value.replace(TEST_REGION, REGION)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Ref", "Fn::")):
            ((fn, arg),) = value.items()
            if fn == "Ref":
                return self.reference(arg, None)
            if fn == "Fn::GetAtt":
                return self.reference(arg[0], arg[1])
            if fn == "Fn::Join":
                return arg[0].join(self.value(arg[1]))
            if fn == "Fn::Sub" and isinstance(arg, str):
                return self.value(self.sub(arg))
            if fn == "Fn::Select":
                return self.value(arg[1])[int(arg[0])]
            if fn == "Fn::Split":
                return self.value(arg[1]).split(arg[0])
            raise ValueError(f"cannot resolve {fn}")
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value
