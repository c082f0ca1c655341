"""The workflow's last states: the success and failure e-mails, sent through the stack's topic."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct


def notify_success(
    scope: Construct, topic: sns.ITopic, debugger: bool, notify_failure: sfn.IChainable
) -> sfn.IChainable:
    """The success e-mail: model, metrics (each source's bits per byte among them), times, the mix, checkpoints and
    reports."""
    publish = _publish(
        scope,
        "NotifySuccess",
        topic,
        "GPT pre-training succeeded",
        "Execution {} succeeded. Model: {}. Hugging Face checkpoint: {}. Final metrics: {}. "
        "Training time: {} s (billed {} s); speed as planned: {}. "
        "Mix as planned: {}. Corpus files not read: {}. Checkpoints: {}. "
        "Training report (health verdicts and plots): {}" + (". Debugger profiler report: {}" if debugger else ""),
        sfn.JsonPath.execution_name,
        sfn.JsonPath.string_at("$.training.Job.ModelArtifacts.S3ModelArtifacts"),
        sfn.JsonPath.string_at("$.plan.hf_checkpoint"),
        sfn.JsonPath.json_to_string(sfn.JsonPath.object_at("$.training.Job.FinalMetricDataList")),
        sfn.JsonPath.string_at("$.training.Job.TrainingTimeInSeconds"),
        sfn.JsonPath.string_at("$.training.Job.BillableTimeInSeconds"),
        sfn.JsonPath.string_at("$.plan.summary.modelled"),
        sfn.JsonPath.string_at("$.plan.summary.mix"),
        sfn.JsonPath.string_at("$.plan.summary.files_unsupported"),
        sfn.JsonPath.string_at("$.plan.checkpoint_uri"),
        sfn.JsonPath.string_at("$.plan.training_report_uri"),
        *([sfn.JsonPath.string_at("$.plan.profiler_report_uri")] if debugger else []),
    )
    publish.add_catch(notify_failure, result_path="$.error")
    return publish


def notify_failure(scope: Construct, topic: sns.ITopic) -> sfn.IChainable:
    """The failure e-mail (``$.error``'s name and cause), then the Fail state."""
    publish = _publish(
        scope,
        "NotifyFailure",
        topic,
        "GPT pre-training failed",
        "Execution {} failed. Error: {}. Cause: {}",
        sfn.JsonPath.execution_name,
        sfn.JsonPath.string_at("$.error.Error"),
        sfn.JsonPath.string_at("$.error.Cause"),
    )
    return publish.next(sfn.Fail(scope, "Failed", error_path="$.error.Error", cause_path="$.error.Cause"))


def _publish(
    scope: Construct, state_id: str, topic: sns.ITopic, subject: str, text: str, *paths: str
) -> tasks.SnsPublish:
    """A publish of ``text`` with ``paths`` filled in. A failed one (throttled, SNS or KMS unavailable) is tried
    again: a duplicate e-mail beats a lost one."""
    publish = tasks.SnsPublish(
        scope,
        state_id,
        topic=topic,
        result_path=sfn.JsonPath.DISCARD,
        subject=subject,
        message=sfn.TaskInput.from_text(sfn.JsonPath.format(text, *paths)),
    )
    publish.add_retry(errors=["States.TaskFailed"], interval=cdk.Duration.seconds(2), max_attempts=3, backoff_rate=2)
    return publish
