"""The customer-managed KMS key that encrypts the stack's data at rest."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

LOGS_KEY_ACTIONS = [
    "kms:Encrypt",
    "kms:Decrypt",
    "kms:ReEncryptFrom",
    "kms:ReEncryptTo",
    "kms:GenerateDataKey",
    "kms:GenerateDataKeyWithoutPlaintext",
]


class DataKey(Construct):
    """One KMS key for buckets, the file system, job volumes, logs and notifications.

    Rotated yearly by KMS. Retained with the data it encrypts: deleting it would make retained
    buckets and file systems unreadable.

    Args:
        retain: keep the key on ``cdk destroy`` (default true; set false only with the data).
        existing_arn: the key an earlier deployment retained, adopted as it is: its policy, written by that
            deployment, already admits CloudWatch Logs for this account and region.
    """

    def __init__(self, scope: Construct, id: str, *, retain: bool = True, existing_arn: str | None = None) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.key: kms.IKey
        if existing_arn:
            self.key = kms.Key.from_key_arn(self, "Key", existing_arn)
            return
        self.key = kms.Key(
            self,
            "Key",
            description=f"{stack.stack_name}: data at rest (buckets, EFS, SageMaker volumes, logs)",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
        )
        # CloudWatch Logs encrypts the stack's log groups with this key. AWS's example policy writes these as
        # Encrypt*, Decrypt*, ReEncrypt*, GenerateDataKey*, Describe*; spelled out, less the key-pair actions
        # (GenerateDataKeyPair*), which envelope encryption of log events never calls, and less DescribeKey:
        # its requests carry no encryption context, so under this condition the statement never allowed it.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
                actions=LOGS_KEY_ACTIONS,
                resources=["*"],  # in a key policy "*" means this key
                conditions={
                    "ArnLike": {"kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:{stack.region}:{stack.account}:*"}
                },
            )
        )
