"""A spend ceiling per stage: an AWS Budgets cost budget on the stage's cost-allocation tag, warning the topic.

Every resource of the stack and every job, model and endpoint the workflow creates carries the tag ``stage``
(``infra/app.py``, ``requests.job_tags``). Budgets filters on it only once it is activated as a cost allocation
tag in the Billing console (docs/deploy.md); until then the budget counts nothing. It warns at 80% of the month's
actual spend and at 100% of AWS's forecast for the month; it stops nothing (what to do: docs/runbook.md).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.notifications import admit_service

STAGE_TAG = "stage"
# (what is compared, the share of the limit in percent) of each warning.
WARNINGS = (("ACTUAL", 80), ("FORECASTED", 100))


def tag_filter(stage: str) -> dict[str, list[str]]:
    """Budgets' filter for one value of a user-defined cost-allocation tag: ``user:<key>$<value>``."""
    return {"TagKeyValue": [f"user:{STAGE_TAG}${stage}"]}


class StageBudget(Construct):
    """A monthly cost budget of ``usd_per_month`` for the resources tagged ``stage=<stage>``, warning ``topic``.

    Args:
        stage: the stage's name, the tag's value.
        usd_per_month: the ceiling, in US dollars.
        topic, key: where the warnings go, and its key; the topic's policy and the key admit Budgets.
    """

    def __init__(
        self, scope: Construct, id: str, *, stage: str, usd_per_month: int, topic: sns.ITopic, key: kms.IKey
    ) -> None:
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        warnings = [
            budgets.CfnBudget.NotificationWithSubscribersProperty(
                notification=budgets.CfnBudget.NotificationProperty(
                    notification_type=kind,
                    comparison_operator="GREATER_THAN",
                    threshold=percent,
                    threshold_type="PERCENTAGE",
                ),
                subscribers=[budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=topic.topic_arn)],
            )
            for kind, percent in WARNINGS
        ]
        self.budget = budgets.CfnBudget(
            self,
            "Budget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=f"{stack.stack_name}-monthly-spend",
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=usd_per_month, unit="USD"),
                cost_filters=tag_filter(stage),
            ),
            notifications_with_subscribers=warnings,
        )
        # AWS Budgets' guide ("Creating an Amazon SNS topic for budget notifications"): the topic's policy admits
        # budgets.amazonaws.com for this account's budgets, and an encrypted topic's key lets it encrypt.
        budgets_of_this_account = {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:budgets::{stack.account}:*"},
        }
        admit_service(topic, key, "budgets.amazonaws.com", budgets_of_this_account)
