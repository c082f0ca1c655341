"""The SNS topic that tells people a workflow succeeded or failed."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

# SNS encrypts each message under a data key it asks KMS for with the publisher's permissions, and reuses it
# for up to 5 minutes: one GenerateDataKey and one Decrypt per publisher and period (SNS's key-management guide).
PUBLISH_KEY_ACTIONS = ["kms:Decrypt", "kms:GenerateDataKey"]


class Notifications(Construct):
    """An encrypted, TLS-only topic; subscribes ``email`` when given.

    Args:
        key: the KMS key the topic encrypts messages with.
        email: an address to subscribe (it must confirm the subscription).
    """

    def __init__(self, scope: Construct, id: str, *, key: kms.IKey, email: str | None = None) -> None:
        super().__init__(scope, id)
        self.key = key
        self.topic = sns.Topic(self, "Topic", display_name="GPT pre-training", master_key=key, enforce_ssl=True)
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))

    def grant_publish(self, grantee: iam.IGrantable) -> None:
        """``sns:Publish`` on the topic and the two key actions SNS uses for it, only through SNS.

        Unlike CDK's ``Topic.grant_publish`` (``kms:GenerateDataKey*`` on the key, any caller), the key
        actions are spelled out and limited by ``kms:ViaService`` to requests SNS makes in this region.
        """
        principal = grantee.grant_principal
        principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["sns:Publish"], resources=[self.topic.topic_arn])
        )
        principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=PUBLISH_KEY_ACTIONS,
                resources=[self.key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"sns.{Stack.of(self).region}.amazonaws.com"}},
            )
        )


def admit_service(topic: sns.ITopic, key: kms.IKey | None, service: str, conditions: dict) -> None:
    """Lets an AWS service publish to ``topic`` (its policy replaces SNS's default one) under ``conditions``, and
    use ``key`` for it: the key actions SNS takes for a publisher, only for topics of this account and region (SNS
    puts the topic's ARN in the encryption context of its data keys). Naming the topic itself there would be a
    cycle: the topic refers to the key, whose policy would refer to the topic."""
    stack, principal = Stack.of(topic), iam.ServicePrincipal(service)
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[principal], actions=["sns:Publish"], resources=[topic.topic_arn], conditions=conditions
        )
    )
    if key:
        topics = f"arn:{stack.partition}:sns:{stack.region}:{stack.account}:*"
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[principal],
                actions=PUBLISH_KEY_ACTIONS,
                resources=["*"],  # in a key policy "*" means this key
                conditions={"ArnLike": {"kms:EncryptionContext:aws:sns:topicArn": topics}},
            )
        )
