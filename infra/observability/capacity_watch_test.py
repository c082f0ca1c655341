"""The capacity watchdog against a stubbed SageMaker (botocore's Stubber holds each request and answer against
botocore's model: the control plane is the one thing faked)."""

from __future__ import annotations

import datetime
import json

import boto3
import pytest
from botocore.stub import Stubber

from infra.observability import capacity_watch

NOW = datetime.datetime(2026, 12, 5, 12, 0, tzinfo=datetime.UTC)


def ago(hours: float) -> datetime.datetime:
    return NOW - datetime.timedelta(hours=hours)


def described(name: str, status: str, transitions: list[tuple[str, float]], created: float = 30) -> dict:
    """A DescribeTrainingJob answer with the fields the model requires and the history (status, hours ago)."""
    return {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        "ModelArtifacts": {"S3ModelArtifacts": ""},
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": status,
        "AlgorithmSpecification": {"TrainingInputMode": "File"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 4, "VolumeSizeInGB": 200},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "CreationTime": ago(created),
        "SecondaryStatusTransitions": [{"Status": s, "StartTime": ago(h)} for s, h in transitions],
    }


def summary(name: str, status: str) -> dict:
    return {"TrainingJobName": name, "TrainingJobArn": f"arn:{name}", "CreationTime": ago(30),
            "TrainingJobStatus": "InProgress", "SecondaryStatus": status}  # fmt: skip


@pytest.fixture
def sagemaker():
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def test_a_job_starting_for_hours_is_the_longest_wait_and_working_jobs_wait_nothing(sagemaker):
    client, stub = sagemaker
    jobs = {
        "gpt-prod-run1-trn": described("gpt-prod-run1-trn", "Training", [("Starting", 20), ("Training", 19)]),
        "gpt-prod-run2-trn": described("gpt-prod-run2-trn", "Starting", [("Starting", 7.5)]),
    }
    list_request = {"StatusEquals": "InProgress", "NameContains": "gpt-prod"}
    # Two pages (each page's jobs described before the next page is asked for), and a job of stage prodeu
    # (gpt-prodeu-...) that NameContains also returns: not described, not counted.
    first = {"TrainingJobSummaries": [summary("gpt-prod-run1-trn", "Training")], "NextToken": "t"}
    stub.add_response("list_training_jobs", first, list_request)
    stub.add_response("describe_training_job", jobs["gpt-prod-run1-trn"], {"TrainingJobName": "gpt-prod-run1-trn"})
    second = [summary("gpt-prodeu-run9-trn", "Starting"), summary("gpt-prod-run2-trn", "Starting")]
    stub.add_response("list_training_jobs", {"TrainingJobSummaries": second}, {**list_request, "NextToken": "t"})
    stub.add_response("describe_training_job", jobs["gpt-prod-run2-trn"], {"TrainingJobName": "gpt-prod-run2-trn"})
    assert capacity_watch.longest_wait(client, "gpt-prod", NOW) == (7.5, "gpt-prod-run2-trn")


def test_an_interrupted_spot_job_has_waited_since_it_last_stopped_working():
    """Interrupted, then Starting again: one wait, from the interruption; a job with no history, from creation."""
    history = [("Starting", 50), ("Training", 49), ("Interrupted", 9), ("Starting", 8.9)]
    assert capacity_watch.hours_waiting(described("j", "Starting", history), NOW) == pytest.approx(9)
    assert capacity_watch.hours_waiting(described("j", "Starting", [], created=2), NOW) == pytest.approx(2)
    assert capacity_watch.hours_waiting(described("j", "Downloading", [("Downloading", 5)]), NOW) == 0


def test_the_record_is_one_metric_in_cloudwatchs_embedded_metric_format():
    """The EMF specification: _aws.Timestamp in ms, CloudWatchMetrics' Namespace, Dimensions (lists of member names
    present in the record) and Metrics (Name, Unit), each metric's value a top-level member."""
    record = json.loads(json.dumps(capacity_watch.metric_record("gpt-prod", 7.5, "gpt-prod-run2-trn", NOW)))
    (directive,) = record["_aws"]["CloudWatchMetrics"]
    assert record["_aws"]["Timestamp"] == 1_796_472_000_000
    assert directive["Namespace"] == "GptPretraining"
    assert all(name in record for dims in directive["Dimensions"] for name in dims)
    assert [(m["Name"], record[m["Name"]]) for m in directive["Metrics"]] == [("CapacityWaitHours", 7.5)]
    assert record["JobPrefix"] == "gpt-prod"
