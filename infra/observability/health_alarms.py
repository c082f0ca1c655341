"""Training health alarms: the questions of SageMaker Debugger's rules, as CloudWatch Metrics Insights queries.

Job names are made per execution, so an alarm cannot name a job's metric, and SEARCH expressions cannot
drive alarms; a Metrics Insights query can, and it finds whichever jobs report. Its WHERE clause matches
label values exactly (no prefixes), so each query aggregates every training job of the account and
region, the worst job deciding: the ``health:*`` names are this project's own, the instance metrics
(GPUUtilization, MemoryUtilization) are every training job's. Each query returns one time series.

No job running means no data, which is treated as not breaching: in particular the stalled-job alarm
reads the heartbeat train.py prints every minute (``health:seconds_since_step``), which keeps coming
while the training loop is stuck and stops with the job.
"""

from __future__ import annotations

import dataclasses
import math

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.config import ObservabilityConfig
from infra.observability.search_expressions import TRAINING_NAMESPACE

PERIOD_MINUTES = 5
ABOVE = cw.ComparisonOperator.GREATER_THAN_THRESHOLD
BELOW = cw.ComparisonOperator.LESS_THAN_THRESHOLD


@dataclasses.dataclass(frozen=True)
class HealthAlarm:
    """One alarm: its query, the threshold it crosses, for how many 5-minute periods, and what to do."""

    id: str
    query: str
    comparison: cw.ComparisonOperator
    threshold: float
    periods: int
    description: str


def query(function: str, metric: str, dimension: str) -> str:
    """``SELECT f("metric") FROM SCHEMA("/aws/sagemaker/TrainingJobs", dimension)``: one series over all jobs."""
    return f'SELECT {function}("{metric}") FROM SCHEMA("{TRAINING_NAMESPACE}", {dimension})'


def health_alarms(obs: ObservabilityConfig, gpus_per_host: int) -> list[HealthAlarm]:
    """The alarms for the stage's thresholds; no GPU alarm when the stage's training instance has no GPU."""
    sustained = max(1, math.ceil(obs.alarm_minutes / PERIOD_MINUTES))
    lasting = f"for {sustained * PERIOD_MINUTES} minutes"
    job = "TrainingJobName"
    alarms = [
        HealthAlarm(
            "InputBound",
            query("MAX", "health:input_wait_percent", job),
            ABOVE,
            obs.input_bound_percent,
            sustained,
            f"A training job waited for input more than {obs.input_bound_percent}% of its step time {lasting}: raise "
            "the reader's parallelism or prefetch, or move the dataset closer (the job's training report says more).",
        ),
        HealthAlarm(
            "LossNotDecreasing",
            query("MIN", "health:loss_drop_percent", job),
            BELOW,
            obs.loss_min_drop_percent,
            sustained,
            f"A training job's loss fell less than {obs.loss_min_drop_percent}% over its last "
            f"{obs.loss_window_steps} steps {lasting}: check the learning rate and the data.",
        ),
        HealthAlarm(
            "StepsSkipped",
            query("SUM", "health:skipped_steps", job),
            ABOVE,
            obs.max_skipped_steps,
            1,
            f"Training skipped more than {obs.max_skipped_steps} steps in {PERIOD_MINUTES} minutes for a non-finite "
            "loss or gradient: lower the learning rate or raise its warm-up (fp16: use bf16). More than "
            f"{obs.max_skipped_steps} in {obs.skipped_window_steps} steps stop the job (the job-failure notification).",
        ),
        HealthAlarm(
            "TrainingStalled",
            query("MAX", "health:seconds_since_step", job),
            ABOVE,
            60 * obs.stalled_minutes,
            1,
            f"A training job made no step for {obs.stalled_minutes} minutes while it kept running: look at every "
            "host's log (input, a worker waiting for the others); stop it if it does not recover.",
        ),
        HealthAlarm(
            "DeviceMemoryNearFull",
            query("MAX", "health:memory_percent", job),
            ABOVE,
            obs.memory_percent,
            1,
            f"A training job's peak device memory is above {obs.memory_percent}%: turn on recompute or lower "
            "micro_batch_size before it runs out.",
        ),
        HealthAlarm(
            "HostMemoryNearFull",
            query("MAX", "MemoryUtilization", "Host"),
            ABOVE,
            obs.memory_percent,
            1,
            f"A training host's memory is above {obs.memory_percent}%: lower the shuffle buffer or reader parallelism.",
        ),
    ]
    if gpus_per_host:
        alarms.insert(
            0,
            HealthAlarm(
                "GpusUnderused",
                query("MIN", "GPUUtilization", "Host"),
                BELOW,
                obs.gpu_underused_percent * gpus_per_host,  # SageMaker sums a host's GPUs
                sustained,
                f"A training host's GPUs were busy less than {obs.gpu_underused_percent}% each ({gpus_per_host} GPUs "
                f"per host) {lasting}: see its job's input-wait and synchronisation shares (dashboard, report).",
            ),
        )
    return alarms


class HealthAlarms(Construct):
    """The :func:`health_alarms` as CloudWatch alarms whose action is the topic (CloudWatch may publish to it:
    ``WorkflowAlarms`` grants that)."""

    def __init__(
        self, scope: Construct, id: str, *, config: ObservabilityConfig, gpus_per_host: int, topic: sns.ITopic
    ):
        super().__init__(scope, id)
        period = cdk.Duration.minutes(PERIOD_MINUTES)
        self.alarms: list[cw.Alarm] = []
        for spec in health_alarms(config, gpus_per_host):
            alarm = cw.Alarm(
                self,
                spec.id,
                metric=cw.MathExpression(expression=spec.query, period=period, label=spec.id),
                threshold=spec.threshold,
                comparison_operator=spec.comparison,
                evaluation_periods=spec.periods,
                datapoints_to_alarm=spec.periods,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,  # no job, no data: nothing to alarm about
                alarm_description=spec.description,
            )
            alarm.add_alarm_action(actions.SnsAction(topic))
            self.alarms.append(alarm)
