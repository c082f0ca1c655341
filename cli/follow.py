"""Follow a workflow execution to its end: its states as they run and its jobs' logs, like the SageMaker SDK's
``fit()`` (``logs_for_job``) does for one job.

    python -m cli start --stage dev --input my-input.json --wait
    python -m cli status --stage dev [EXECUTION]

Every ``poll_seconds``: the execution's status, the new log lines of every SageMaker job it started so far
(CloudWatch, ``/aws/sagemaker/TrainingJobs`` and ``/aws/sagemaker/ProcessingJobs``, one stream per host) and
its new history events (one line per state: ``▶`` entered, ``✓`` done, ``✗`` failed with the error and its
message, never both). It returns when the execution has ended, after the jobs' last lines.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from botocore.exceptions import ClientError

ENDED = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")
# The Task resources that start a SageMaker job, the request member naming it, and its log group.
JOB_RESOURCES = {
    "createTrainingJob": ("TrainingJobName", "/aws/sagemaker/TrainingJobs"),
    "createProcessingJob": ("ProcessingJobName", "/aws/sagemaker/ProcessingJobs"),
}
FAILED_EVENTS = {"TaskFailed", "LambdaFunctionFailed", "TaskTimedOut", "TaskStartFailed", "TaskSubmitFailed"}


def readable_cause(cause: str) -> str:
    """A Lambda's errorMessage (without its stack trace) or a job's FailureReason, else the cause as is."""
    try:
        detail = json.loads(cause)
    except ValueError:
        return cause
    if not isinstance(detail, dict):
        return cause
    return detail.get("errorMessage") or detail.get("FailureReason") or cause


class Follower:
    """The lines of one execution not yet shown; ``poll`` returns the execution's status after showing them."""

    def __init__(self, session: Any, execution_arn: str, out: Callable[[str], None] = print, show_logs: bool = True):
        self.sfn, self.logs = session.client("stepfunctions"), session.client("logs")
        self.arn, self.out, self.show_logs = execution_arn, out, show_logs
        self.last_event = 0
        self.task: str | None = None  # the Task state running now
        self.failed: set[str] = set()
        self.jobs: dict[str, str] = {}  # job name -> log group
        self.log_since: dict[str, int] = {}  # job name -> timestamp of its last line shown (ms)
        self.log_seen: set[str] = set()

    def poll(self) -> dict[str, Any]:
        execution = self.sfn.describe_execution(executionArn=self.arn)  # first: the events below cover its status
        self.show_new_logs()  # before the events: a job's last lines come before its state's ✓
        for event in self._new_events():
            self._show(event)
        return execution

    def show_new_logs(self) -> None:
        for job, group in self.jobs.items() if self.show_logs else ():
            self._show_logs(job, group)

    def _new_events(self) -> Iterator[dict[str, Any]]:
        token = None
        while True:
            page = self.sfn.get_execution_history(
                executionArn=self.arn, maxResults=1000, **({"nextToken": token} if token else {})
            )
            for event in page["events"]:
                if event["id"] > self.last_event:
                    self.last_event = event["id"]
                    yield event
            token = page.get("nextToken")
            if not token:
                return

    def _show(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "TaskStateEntered":
            self.task = event["stateEnteredEventDetails"]["name"]
            self.failed.discard(self.task)
            self.out(f"▶ {self.task}")
        elif kind == "TaskStateExited":
            name = event["stateExitedEventDetails"]["name"]
            if name not in self.failed:  # a caught failure exits the state too: it was reported as ✗
                self.out(f"✓ {name}")
        elif kind == "TaskScheduled":
            self._note_job(event["taskScheduledEventDetails"])
        elif kind in FAILED_EVENTS:
            details = next((v for k, v in event.items() if k.endswith("EventDetails")), {})
            self.failed.add(self.task or "")
            cause = readable_cause(details.get("cause", ""))
            self.out(f"✗ {self.task}: {details.get('error', kind)}" + (f": {cause}" if cause else ""))

    def _note_job(self, details: dict[str, Any]) -> None:
        action = details.get("resource", "").split(".")[0]
        if details.get("resourceType") == "sagemaker" and action in JOB_RESOURCES:
            member, group = JOB_RESOURCES[action]
            name = json.loads(details.get("parameters", "{}")).get(member)
            if name:
                self.jobs[name] = group
                self.out(
                    f"  {member[: -len('Name')]} {name}" + (f": its logs follow ({group})" if self.show_logs else "")
                )

    def _show_logs(self, job: str, group: str) -> None:
        token = None
        while True:
            try:
                page = self.logs.filter_log_events(
                    logGroupName=group,
                    logStreamNamePrefix=f"{job}/",
                    startTime=self.log_since.get(job, 0),
                    **({"nextToken": token} if token else {}),
                )
            except ClientError as error:
                if error.response["Error"]["Code"] == "ResourceNotFoundException":
                    return  # no log stream yet: the instances are starting
                raise
            for line in page.get("events", []):
                if line["eventId"] not in self.log_seen:
                    self.log_seen.add(line["eventId"])
                    self.log_since[job] = max(self.log_since.get(job, 0), line["timestamp"])
                    host = line["logStreamName"].split("/")[1].split("-")[:2]
                    self.out(f"  [{'-'.join(host)}] {line['message'].rstrip()}")
            token = page.get("nextToken")
            if not token:
                return


def follow(
    session: Any,
    execution_arn: str,
    out: Callable[[str], None] = print,
    poll_seconds: float = 10,
    sleep: Callable[[float], None] | None = None,
) -> str:
    """Shows the execution until it ends; returns its final status, after a line with its error if it failed."""
    follower = Follower(session, execution_arn, out)
    while (execution := follower.poll())["status"] not in ENDED:
        (sleep or time.sleep)(poll_seconds)
    follower.show_new_logs()  # what the jobs wrote after the last look
    status = execution["status"]
    if status == "SUCCEEDED":
        out(f"Execution {execution['name']} succeeded.")
    else:
        cause = readable_cause(execution.get("cause", ""))
        out(f"Execution {execution['name']} {status}: {execution.get('error', '')}" + (f": {cause}" if cause else ""))
    return status


def latest_execution(session: Any, state_machine_arn: str) -> str | None:
    """The ARN of the state machine's most recent execution, or None."""
    listed = session.client("stepfunctions").list_executions(stateMachineArn=state_machine_arn, maxResults=1)
    return listed["executions"][0]["executionArn"] if listed["executions"] else None


def execution_arn(state_machine_arn: str, execution: str) -> str:
    """An execution's ARN from its name or ARN: ``...:stateMachine:M`` and ``run`` -> ``...:execution:M:run``."""
    if execution.startswith("arn:"):
        return execution
    return state_machine_arn.replace(":stateMachine:", ":execution:") + f":{execution}"
