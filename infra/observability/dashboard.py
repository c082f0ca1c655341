"""The CloudWatch dashboard users watch a run on: workflow, training and processing hosts, progress, EFS.

SageMaker publishes instance metrics (``/aws/sagemaker/TrainingJobs``, ``.../ProcessingJobs``, dimension
``Host`` = ``<job>/algo-<n>``) and the metrics parsed from the training log (``TrainingJobName``) once a
minute, so a job's lines appear about a minute after its instances start. Job names are made per
execution, so every job chart is a SEARCH limited to this stack's name prefix.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.observability import efs_metrics
from infra.observability.search_expressions import PROCESSING_NAMESPACE, TRAINING_NAMESPACE, search
from infra.plan_step.metric_definitions import METRIC_DEFINITIONS, SOURCE_TOKEN

PERIOD = cdk.Duration.minutes(1)
HEALTHY_GPU_PERCENT = 90
TRAINING_HOST_METRICS = {
    "GPUUtilization": "GPU utilization (% summed over the host's GPUs)",
    "GPUMemoryUtilization": "GPU memory (% summed over the host's GPUs)",
    "CPUUtilization": "CPU utilization (% summed over cores)",
    "MemoryUtilization": "Host memory (%)",
    "DiskUtilization": "Disk (%)",
}
PROCESSING_HOST_METRICS = {
    "CPUUtilization": "CPU utilization (% summed over cores)",
    "MemoryUtilization": "Host memory (%)",
}
PROGRESS_CHARTS = {  # title -> metric definitions charted together
    "Loss (train and validation)": ("train:loss", "validation:loss"),
    "Validation bits per byte": ("validation:bits_per_byte",),
    "Tokens per second": ("train:tokens_per_second",),
    "Learning rate": ("train:learning_rate",),
    "Model FLOPs utilization (0-1)": ("train:mfu",),
}
HEALTH_CHARTS = {  # training/observe/observer.py's [health] and [heartbeat] lines
    "Step time: input wait, compute, sync (%)": (
        "health:input_wait_percent",
        "health:compute_percent",
        "health:sync_percent",
    ),
    "Gradient norm (before clipping)": ("health:grad_norm",),
    "Peak device memory (%)": ("health:memory_percent",),
    "Seconds since the last step": ("health:seconds_since_step",),
    "Loss drop over the loss window (%)": ("health:loss_drop_percent",),
    "Steps skipped (non-finite gradient)": ("health:skipped_steps",),
}


class TrainingDashboard(Construct):
    """One dashboard per stage, created with the stack.

    Args:
        state_machine: the workflow whose executions are charted.
        file_system_id: the datasets file system.
        job_prefix: the start of every job name of this stack (``gpt-<stage>``); SEARCH keeps these.
        gpus_per_host: GPUs of the stage's default training instance, for the healthy-GPU line (default 8).
        alarms: alarms whose state the dashboard shows (default none).
        dashboard_name: default ``<stack name>``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        state_machine: sfn.IStateMachine,
        file_system_id: str,
        job_prefix: str,
        gpus_per_host: int = 8,
        alarms: Sequence[cw.IAlarm] = (),
        dashboard_name: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        self._prefix = job_prefix
        self.dashboard = cw.Dashboard(
            self,
            "Dashboard",
            dashboard_name=dashboard_name or cdk.Stack.of(self).stack_name,
            default_interval=cdk.Duration.hours(3),
            widgets=[
                [_text(_intro(job_prefix), height=4)],
                self._workflow(state_machine, alarms),
                [_text(_training_guide(gpus_per_host))],
                self._hosts(TRAINING_NAMESPACE, TRAINING_HOST_METRICS, gpus_per_host, width=8),  # wraps at 24
                [_text(PROGRESS_GUIDE)],
                [*self._progress(PROGRESS_CHARTS), self._sources()],
                [_text(HEALTH_GUIDE)],
                self._progress(HEALTH_CHARTS, width=4),
                [_text(PROCESSING_GUIDE)],
                self._hosts(PROCESSING_NAMESPACE, PROCESSING_HOST_METRICS, 0, width=12),
                [_text(EFS_GUIDE)],
                self._efs(file_system_id),
            ],
        )

    def _workflow(self, machine: sfn.IStateMachine, alarms: Sequence[cw.IAlarm]) -> list[cw.IWidget]:
        period = cdk.Duration.minutes(5)
        executions = cw.GraphWidget(
            title="Workflow executions (per 5 minutes)",
            left=[
                machine.metric_started(period=period, label="Started"),
                machine.metric_succeeded(period=period, label="Succeeded"),
                machine.metric_failed(period=period, label="Failed"),
                machine.metric_timed_out(period=period, label="Timed out"),
                machine.metric_aborted(period=period, label="Aborted"),
            ],
            width=8,
        )
        duration = cw.GraphWidget(
            title="Execution duration (hours)",
            left=[
                cw.MathExpression(
                    expression="ms / 3600000",
                    using_metrics={"ms": machine.metric_time(period=period, statistic="Maximum")},
                    label="Longest execution ending in the period",
                    period=period,
                )
            ],
            width=8,
        )
        status = cw.AlarmStatusWidget(title="Alarms", alarms=list(alarms), width=8, height=6)
        return [executions, duration, status]

    def _hosts(self, namespace: str, metrics: dict[str, str], gpus: int, *, width: int) -> list[cw.IWidget]:
        """One chart per metric, one line per host of every job of this stack."""
        widgets: list[cw.IWidget] = []
        for metric, title in metrics.items():
            healthy = [
                cw.HorizontalAnnotation(value=HEALTHY_GPU_PERCENT * gpus, label=f"{HEALTHY_GPU_PERCENT}% x {gpus} GPUs")
            ]
            widgets.append(
                cw.GraphWidget(
                    title=f"{'Training' if namespace == TRAINING_NAMESPACE else 'Processing'}: {title}",
                    left=[self._search(namespace, "Host", metric)],
                    left_annotations=healthy if metric == "GPUUtilization" and gpus else None,
                    left_y_axis=cw.YAxisProps(min=0, show_units=False),
                    live_data=True,
                    width=width,
                )
            )
        return widgets

    def _progress(self, charts: dict[str, tuple[str, ...]], *, width: int = 6) -> list[cw.IWidget]:
        """The training log's metrics (``infra/plan_step/metric_definitions.py``), one line per job."""
        defined = {d["Name"] for d in METRIC_DEFINITIONS}
        widgets: list[cw.IWidget] = []
        for title, names in charts.items():
            missing = set(names) - defined
            if missing:
                raise ValueError(f"dashboard charts {sorted(missing)}, which no metric definition produces")
            widgets.append(
                cw.GraphWidget(
                    title=title,
                    left=[self._search(TRAINING_NAMESPACE, "TrainingJobName", name) for name in names],
                    live_data=True,
                    width=width,
                )
            )
        return widgets

    def _sources(self) -> cw.IWidget:
        """Each source's validation bits per byte, for a mix (metric_definitions.SOURCE_METRIC), one line a source."""
        partial = {"MetricName": SOURCE_TOKEN, "TrainingJobName": self._prefix}
        expression = search(TRAINING_NAMESPACE, ["TrainingJobName"], None, partial=partial)
        return cw.GraphWidget(
            title="Validation bits per byte, each source of a mix",
            left=[cw.SearchExpression(expression=expression, label="${PROP('MetricName')}", period=PERIOD)],
            live_data=True,
            width=6,
        )

    def _efs(self, file_system_id: str) -> list[cw.IWidget]:
        throughput = cw.GraphWidget(
            title="EFS throughput vs permitted",
            left=[
                efs_metrics.throughput_mibps(file_system_id, PERIOD),
                efs_metrics.permitted_mibps(file_system_id, PERIOD),
            ],
            right=[efs_metrics.throughput_percent(file_system_id, PERIOD)],
            left_y_axis=cw.YAxisProps(min=0, label="MiB/s", show_units=False),
            right_y_axis=cw.YAxisProps(min=0, max=100, label="%", show_units=False),
            width=8,
        )
        connections = cw.GraphWidget(
            title="EFS client connections",
            left=[efs_metrics.efs_metric(file_system_id, "ClientConnections", "Sum", PERIOD)],
            width=8,
        )
        storage = cw.GraphWidget(
            title="EFS storage (GiB)",
            left=[
                cw.MathExpression(
                    expression="bytes / 1073741824",
                    using_metrics={
                        "bytes": efs_metrics.efs_metric(
                            file_system_id, "StorageBytes", "Average", cdk.Duration.minutes(15), StorageClass="Total"
                        )
                    },
                    label="Stored (GiB)",
                    period=cdk.Duration.minutes(15),
                )
            ],
            width=8,
        )
        return [throughput, connections, storage]

    def _search(self, namespace: str, dimension: str, metric: str) -> cw.SearchExpression:
        """One line per host or job, labelled with the host or job name (and the metric on shared charts)."""
        return cw.SearchExpression(
            expression=search(namespace, [dimension], metric, partial={dimension: self._prefix}),
            label=f"${{PROP('MetricName')}} ${{PROP('Dim.{dimension}')}}",
            period=PERIOD,
        )


def _text(markdown: str, *, height: int = 2) -> cw.TextWidget:
    return cw.TextWidget(markdown=markdown, width=24, height=height)


def _intro(job_prefix: str) -> str:
    return (
        f"# GPT pre-training: jobs `{job_prefix}-*`\n"
        "Each job's lines appear about a minute after its instances start (SageMaker publishes every minute). "
        "One line per host (`<job>/algo-<n>`) or per job. Every job ends with a **training report** (link in the "
        "success e-mail; `training/<job>/tensorboard/training-report.html` in the models bucket): plots and each "
        "health rule's verdict (input-bound, GPUs underused, loss not decreasing or not finite, stalled, memory "
        "near full) with what to change; the same rules alarm while it runs. Failed jobs, failed executions, "
        "these alarms and EFS near its limit are e-mailed to the stack's topic."
    )


def _training_guide(gpus: int) -> str:
    return (
        "## Training instances\n"
        f"Healthy: **GPU utilization above {HEALTHY_GPU_PERCENT}% per GPU** (the line marks {HEALTHY_GPU_PERCENT}% "
        f"x {gpus} GPUs of the stage's instance), GPU memory flat after the first steps, disk well below 90%. "
        "Low GPU with high CPU: input pipeline (CPU bottleneck); low GPU with low CPU and busy EFS: I/O bottleneck."
    )


PROGRESS_GUIDE = (
    "## Training progress (parsed from the training log)\n"
    "Healthy: loss falling steadily, validation loss following it (a widening gap is overfitting), tokens per "
    "second flat after warm-up (dips at checkpoints), learning rate following its warm-up and decay schedule, "
    "model FLOPs utilization roughly 0.3-0.5 on A100/H100 in bf16. A mix charts each source's validation bits per "
    "byte (tokenizer-independent, as The Pile's paper reports it): a source whose line stops falling is seen enough."
)
HEALTH_GUIDE = (
    "## Training health (the [health] line of every logging window, the heartbeat every minute)\n"
    "Healthy: input wait a few % of step time (input-bound above `observability.input_bound_percent`, 20 by "
    "default: the design's bottleneck), compute most of it, sync small; gradient norm steady; device memory "
    "below `memory_percent` (90); seconds since the last step far below `stalled_minutes` (30); loss drop above "
    "`loss_min_drop_percent` (1); no skipped steps after the first fp16 steps."
)
PROCESSING_GUIDE = (
    "## Preprocessing instances (processing jobs)\n"
    "CreateProcessingJob takes no Debugger profiling configuration, so these charts are all there is for "
    "preprocessing. Healthy: CPU near 100% x cores while tokenizing (the work is CPU-bound), memory steady."
)
EFS_GUIDE = (
    "## EFS (datasets)\n"
    "Healthy: throughput well below the permitted line (right axis: under about 50%). Near 100% the file "
    "system throttles and training waits on input: the alarm fires above the configured share for 5 minutes."
)
