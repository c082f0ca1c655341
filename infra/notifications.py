"""The SNS topic that tells people a workflow succeeded or failed."""

from __future__ import annotations

from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct


class Notifications(Construct):
    """An encrypted, TLS-only topic; subscribes ``email`` when given.

    Args:
        key: the KMS key the topic encrypts messages with.
        email: an address to subscribe (it must confirm the subscription).
    """

    def __init__(self, scope: Construct, id: str, *, key: kms.IKey, email: str | None = None) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(self, "Topic", display_name="GPT pre-training", master_key=key, enforce_ssl=True)
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
