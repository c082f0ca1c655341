"""Who hears of what, in the synthesized templates: every stage but dev e-mails a person, a failed job is announced
once, and the stage's spend has a ceiling that warns the same topic."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from infra.plan_step.names import resource_names
from local.definition import resolve_definition
from tests.api_contract import validate
from tests.synth import ROOT, synth_template

STAGES = ("dev", "prod")


def resources(template: dict, kind: str) -> dict[str, dict]:
    return {k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == kind}


def topic_ref(template: dict) -> dict:
    return {"Ref": next(iter(resources(template, "AWS::SNS::Topic")))}


def matches(pattern: Any, event: Any) -> bool:
    """EventBridge's matching, for the operators this stack could use: exact values, prefix, anything-but."""
    if isinstance(pattern, dict):
        return isinstance(event, dict) and all(key in event and matches(p, event[key]) for key, p in pattern.items())
    values = event if isinstance(event, list) else [event]
    for value in values:
        for rule in pattern:
            if not isinstance(rule, dict) and rule == value:
                return True
            if isinstance(rule, dict) and "prefix" in rule and str(value).startswith(rule["prefix"]):
                return True
            if isinstance(rule, dict) and "anything-but" in rule and value not in _listed(rule["anything-but"]):
                return True
    return False


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def failed_job_event(job: str) -> dict:
    """SageMaker's event for a training job that failed (the EventBridge guide's 'Training job state change')."""
    return {
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "resources": [f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{job}"],
        "detail": {"TrainingJobName": job, "TrainingJobStatus": "Failed", "FailureReason": "AlgorithmError: ..."},
    }


@pytest.mark.parametrize("stage", STAGES)
def test_a_failed_training_job_of_the_workflow_is_announced_once(stage: str):
    template = synth_template(stage)
    job = resource_names(f"gpt-{stage}", "nightly", "0ff11e00")["training"]
    # Rules with targets that events reach (a scheduled rule, the capacity watchdog's, has no pattern).
    rules = [r for r in resources(template, "AWS::Events::Rule").values() if r.get("Targets") and "EventPattern" in r]
    by_rules = [r for r in rules if matches(r["EventPattern"], failed_job_event(job))]
    failed_alarms = [
        a for a in resources(template, "AWS::CloudWatch::Alarm").values()
        if a.get("MetricName") == "ExecutionsFailed" and a.get("AlarmActions")
    ]  # fmt: skip
    definition = resolve_definition(template, "us-east-1", "123456789012")
    (catch,) = [c for c in definition["States"]["Train"]["Catch"] if c["ErrorEquals"] == ["States.ALL"]]
    assert definition["States"][catch["Next"]]["Resource"] == "arn:aws:states:::sns:publish"  # NotifyFailure
    assert len(by_rules) + len(failed_alarms) + 1 == 1, (by_rules, failed_alarms)


def test_the_prod_topic_e_mails_a_person_and_dev_may_go_without():
    prod = synth_template("prod")
    (subscription,) = resources(prod, "AWS::SNS::Subscription").values()
    assert subscription == {"Protocol": "email", "TopicArn": topic_ref(prod), "Endpoint": "ml-alerts@example.com"}
    assert not resources(synth_template("dev"), "AWS::SNS::Subscription")  # dev: its developer watches the run


@pytest.mark.parametrize(("stage", "usd"), [("dev", 1000), ("prod", 30000)])
def test_each_stage_has_a_monthly_budget_on_its_tag_that_warns_the_topic(stage: str, usd: int):
    template = synth_template(stage)
    (budget,) = resources(template, "AWS::Budgets::Budget").values()
    data = budget["Budget"]
    assert data["CostFilters"] == {"TagKeyValue": [f"user:stage${stage}"]}  # the tag every resource and job carries
    assert data["BudgetLimit"] == {"Amount": usd, "Unit": "USD"}
    warnings = budget["NotificationsWithSubscribers"]
    assert [(w["Notification"]["NotificationType"], w["Notification"]["Threshold"]) for w in warnings] == [
        ("ACTUAL", 80), ("FORECASTED", 100),
    ]  # fmt: skip
    assert all(w["Subscribers"] == [{"SubscriptionType": "SNS", "Address": topic_ref(template)}] for w in warnings)
    topic = "arn:aws:sns:us-east-1:123456789012:topic"
    subscribers = [{"SubscriptionType": "SNS", "Address": topic}]
    request = {  # CloudFormation's properties as the API's CreateBudget takes them (an Amount is a string there)
        "AccountId": "123456789012",
        "Budget": {**data, "BudgetLimit": {**data["BudgetLimit"], "Amount": str(usd)}},
        "NotificationsWithSubscribers": [{**w, "Subscribers": subscribers} for w in warnings],
    }
    assert validate("budgets", "CreateBudget", request) == []
    tags = {t["Key"]: t["Value"] for t in resources(template, "AWS::SNS::Topic").popitem()[1]["Tags"]}
    assert tags["stage"] == stage


def test_budgets_may_publish_to_the_encrypted_topic_only_for_this_accounts_budgets():
    template = synth_template("prod")
    (policy,) = resources(template, "AWS::SNS::TopicPolicy").values()
    (budgets,) = [
        s for s in policy["PolicyDocument"]["Statement"] if s["Principal"] == {"Service": "budgets.amazonaws.com"}
    ]
    assert budgets["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "123456789012"},
        "ArnLike": {"aws:SourceArn": "arn:aws:budgets::123456789012:*"},
    }
    (key,) = resources(template, "AWS::KMS::Key").values()
    admitted = json.dumps([s["Principal"] for s in key["KeyPolicy"]["Statement"]])
    assert "budgets.amazonaws.com" in admitted


@pytest.mark.parametrize("stage", STAGES)
def test_efs_is_a_cache_of_the_datasets_bucket_that_follows_it_and_idles_cheaply(stage: str):
    template = synth_template(stage)
    (task,) = resources(template, "AWS::DataSync::Task").values()
    assert task["Options"]["PreserveDeletedFiles"] == "REMOVE"  # a dataset made anew leaves no old shard on EFS
    assert task["Options"]["TransferMode"] == "CHANGED"  # REMOVE needs it: DataSync compares the destination
    (file_system,) = resources(template, "AWS::EFS::FileSystem").values()
    assert file_system["LifecyclePolicies"] == [
        {"TransitionToIA": "AFTER_14_DAYS"}, {"TransitionToPrimaryStorageClass": "AFTER_1_ACCESS"},
    ]  # fmt: skip


@pytest.mark.parametrize("stage", STAGES)
def test_the_deploy_page_lists_the_quotas_each_stage_asks_for(stage: str, tmp_path):
    from infra.plan_step.conftest import make_settings
    from infra.plan_step.plan import plan_execution
    from infra.plan_step.quotas import needed_quotas
    from local.folder_store import FolderStore

    store = FolderStore(tmp_path)
    for i in range(8):
        store.put_text(f"s3://raw-bucket/pile/{i:02d}.jsonl.zst", "x")
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "deploy": True}
    plan = plan_execution(raw, "q", make_settings(stage), store)
    needed = needed_quotas(plan["requests"], ["tokenizer", "shards", "training", "endpoint_config"])
    page = (ROOT / "docs" / "deploy.md").read_text()
    listed = dict(re.findall(rf"^\| {stage} \| `([^`]+)` \| (\d+) \|", page, re.M))
    assert {name: count for name, (_, count) in needed.items()} == {k: int(v) for k, v in listed.items()}
