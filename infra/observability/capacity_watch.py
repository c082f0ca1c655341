"""The capacity watchdog's Lambda handler: how long has the stage's longest-waiting training job waited for capacity?

A spot job (or an on-demand one SageMaker cannot place) sits in InProgress/Starting with no host running: train.py
has not started, so no metric of the job moves and no health alarm can see it. Every 15 minutes this lists the
stage's training jobs in progress, reads each one's secondary-status history, and writes one CloudWatch metric in
the embedded metric format (a JSON log line that CloudWatch Logs turns into the metric; no PutMetricData call):
the hours since the job last did work, for the job that has waited longest (0 when none waits). The alarm on it is
``capacity_alarm.py``'s. Standard library and boto3 only: the Lambda runtime's.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import boto3

NAMESPACE = "GptPretraining"
METRIC = "CapacityWaitHours"
# Secondary statuses in which a job holds no working host (botocore's SecondaryStatus enum and the documentation
# of SecondaryStatusTransition): Starting (launching instances, "Insufficient capacity error from EC2 ...
# retrying!"), Pending (queued for capacity), Interrupted (a spot reclaim), Restarting, and the retired
# LaunchingMLInstances.
WAITING = frozenset({"Starting", "Pending", "Interrupted", "Restarting", "LaunchingMLInstances"})


def hours_waiting(job: dict[str, Any], now: datetime.datetime) -> float:
    """Hours since ``job`` (a DescribeTrainingJob answer) last left a working status, or 0 if it is working now.

    The trailing run of waiting transitions counts as one wait: Interrupted, then Starting again, is one stretch
    without a host. A job with no transition yet has waited since its creation.
    """
    if job["SecondaryStatus"] not in WAITING:
        return 0.0
    since = job["CreationTime"]
    for transition in reversed(job.get("SecondaryStatusTransitions", [])):
        if transition["Status"] not in WAITING:
            break
        since = transition["StartTime"]
    return max((now - since).total_seconds() / 3600, 0.0)


def longest_wait(sagemaker: Any, job_prefix: str, now: datetime.datetime) -> tuple[float, str | None]:
    """The longest wait among the training jobs in progress named ``<job_prefix>-...``, and that job's name."""
    longest, name = 0.0, None
    for page in sagemaker.get_paginator("list_training_jobs").paginate(
        StatusEquals="InProgress", NameContains=job_prefix
    ):
        for summary in page["TrainingJobSummaries"]:
            if not summary["TrainingJobName"].startswith(f"{job_prefix}-"):  # NameContains matches anywhere
                continue
            job = sagemaker.describe_training_job(TrainingJobName=summary["TrainingJobName"])
            waited = hours_waiting(job, now)
            if waited > longest:
                longest, name = waited, job["TrainingJobName"]
    return longest, name


def metric_record(job_prefix: str, hours: float, job: str | None, now: datetime.datetime) -> dict[str, Any]:
    """One embedded-metric-format record: ``METRIC`` in hours under the dimension ``JobPrefix``."""
    return {
        "_aws": {
            "Timestamp": int(now.timestamp() * 1000),
            "CloudWatchMetrics": [
                {"Namespace": NAMESPACE, "Dimensions": [["JobPrefix"]], "Metrics": [{"Name": METRIC, "Unit": "None"}]}
            ],
        },
        "JobPrefix": job_prefix,
        METRIC: round(hours, 3),
        "TrainingJobName": job or "",  # a property of the log line, not a dimension
    }


def handler(event: dict, context: Any) -> dict[str, Any]:
    """The scheduled invocation (its rule's input: ``{"job_prefix": ...}``): measure, print the record, return it."""
    now = datetime.datetime.now(datetime.UTC)
    job_prefix = event["job_prefix"]
    hours, job = longest_wait(boto3.client("sagemaker"), job_prefix, now)
    record = metric_record(job_prefix, hours, job, now)
    print(json.dumps(record))
    return record
