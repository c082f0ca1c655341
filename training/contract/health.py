"""Training health rules: the questions SageMaker Debugger's rules asked, answered from the job's own windows.

Each logging window is a :class:`Window`; at the end of the job :func:`verdicts` judges the run with
the thresholds of :class:`HealthRules` (hyperparameter ``health_rules``, JSON; the stack passes the
stage's ``observability`` thresholds, the same the CloudWatch alarms use).
"""

from __future__ import annotations

import dataclasses
import json
import statistics


@dataclasses.dataclass(frozen=True)
class HealthRules:
    """Thresholds, with their defaults: the stack's too (``observability.*``; infra/config loads this file).

    Args:
        gpu_underused_percent: devices computing less than this share of step time are underused.
        input_bound_percent: waiting for input more than this share of step time is input-bound.
        loss_min_drop_percent: the loss must fall at least this much (relative) over ``loss_window_steps``.
        loss_window_steps: steps over which the loss is compared (the last window against the one before).
        stalled_minutes: no step for this long is a stall.
        memory_percent: peak memory above this share of the device's memory is close to full.
        max_skipped_steps: more steps skipped for a non-finite loss or gradient than this within
            ``skipped_window_steps`` steps is a problem, and ends the job (a step is skipped, not applied, when its
            loss or gradient norm is not finite: float16 overflows, a bad batch or a spike).
        skipped_window_steps: the steps over which skipped steps are counted.
    """

    gpu_underused_percent: float = 60
    input_bound_percent: float = 20
    loss_min_drop_percent: float = 1.0
    loss_window_steps: int = 500
    stalled_minutes: float = 30
    memory_percent: float = 90
    max_skipped_steps: int = 10
    skipped_window_steps: int = 1000

    @classmethod
    def from_json(cls, text: str) -> HealthRules:
        values = json.loads(text or "{}")
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"health_rules: unknown thresholds {sorted(unknown)}")
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class Window:
    """One logging window of the chief: the step it ends at and what was measured over it."""

    step: int
    loss: float
    learning_rate: float
    tokens_per_sec: float
    mfu: float
    grad_norm: float
    input_share: float
    compute_share: float
    sync_share: float
    skipped: int
    peak_memory_gb: float
    memory_share: float | None


@dataclasses.dataclass(frozen=True)
class Verdict:
    rule: str
    ok: bool | None  # None: not enough data to judge
    finding: str  # the numbers behind the verdict
    advice: str = ""

    @property
    def status(self) -> str:
        return {True: "ok", False: "PROBLEM", None: "n/a"}[self.ok]


def loss_windows(
    steps: list[int], losses: list[float], window_steps: int
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]] | None:
    """The (step, loss) log points compared: the last ``window_steps`` and the ``window_steps`` before them.

    With fewer steps than two windows (or log lines too far apart to fill both), the run's second half and its
    first; None below 2 points.
    """
    if len(losses) < 2:
        return None
    points, last = list(zip(steps, losses, strict=True)), steps[-1]
    if last - steps[0] >= 2 * window_steps:
        older = [p for p in points if last - 2 * window_steps < p[0] <= last - window_steps]
        newer = [p for p in points if p[0] > last - window_steps]
        if older and newer:  # log lines further apart than a window leave one empty: then the halves
            return older, newer
    half = len(points) // 2
    return points[:half], points[half:]


def loss_drop_percent(steps: list[int], losses: list[float], window_steps: int) -> float | None:
    """Relative fall (%) of the mean loss of the newer window against the older (``loss_windows``)."""
    windows = loss_windows(steps, losses, window_steps)
    if windows is None:
        return None
    before, after = (statistics.fmean(loss for _, loss in window) for window in windows)
    return 100.0 * (before - after) / before if before else None


def _loss_fall(steps: list[int], losses: list[float], window_steps: int, drop: float, threshold: float) -> str:
    """The loss verdict's figures: what the percentage is of, and the means it is computed from."""
    older, newer = loss_windows(steps, losses, window_steps)

    def mean(window: list[tuple[int, float]]) -> str:
        return f"{statistics.fmean(loss for _, loss in window):.3f} (log lines of steps {window[0][0]}-{window[-1][0]})"

    return (
        f"mean loss fell {drop:.2f}% from {mean(older)} to {mean(newer)} (threshold {threshold:g}%; "
        f"{losses[0]:.3f} at the first log line, {losses[-1]:.3f} at the last)"
    )


def skipped_in_window(windows: list[Window], window_steps: int, end: int | None = None) -> int:
    """Steps skipped in the ``window_steps`` steps up to ``end`` (default: the last window's step), counted by
    logging window: each window whose step is in that range. The windows are in step order: it reads back from
    the newest only as far as the range goes (the loop asks at every logging step)."""
    if end is None:
        end = windows[-1].step if windows else 0
    total = 0
    for window in reversed(windows):
        if window.step <= end - window_steps:
            break
        if window.step <= end:
            total += window.skipped
    return total


def most_skipped(windows: list[Window], window_steps: int) -> int:
    """The most steps skipped in any ``window_steps`` steps ending at a logging window: ``skipped_in_window``'s
    figure for each window's step, in one pass over the windows (a run has one per ``log_every`` steps)."""
    worst = total = first = 0
    for window in windows:
        total += window.skipped
        while windows[first].step <= window.step - window_steps:
            total -= windows[first].skipped
            first += 1
        worst = max(worst, total)
    return worst


def _steady(windows: list[Window]) -> list[Window]:
    """Windows after the first (which holds tracing and warm-up), unless it is the only one."""
    return windows[1:] if len(windows) > 1 else windows


def verdicts(windows: list[Window], rules: HealthRules, longest_gap_s: float, on_gpu: bool = True) -> list[Verdict]:
    """Every rule's verdict for the run.

    ``longest_gap_s`` is the longest time between two steps. Without a GPU (``on_gpu`` false: a CPU run such as
    ``make run``'s) "GPUs underused" is not judged.
    """
    if not windows:
        return [Verdict("training", None, "no logging window completed")]
    steady = _steady(windows)
    input_pct = 100 * statistics.fmean(w.input_share for w in steady)
    compute_pct = 100 * statistics.fmean(w.compute_share for w in steady)
    sync_pct = 100 * statistics.fmean(w.sync_share for w in steady)
    split = f"input wait {input_pct:.0f}%, compute {compute_pct:.0f}%, synchronisation {sync_pct:.0f}% of step time"
    mfu = statistics.fmean(w.mfu for w in steady)
    steps, losses = [w.step for w in windows], [w.loss for w in windows]
    drop = loss_drop_percent(steps, losses, rules.loss_window_steps)
    skipped = sum(w.skipped for w in windows)
    worst = most_skipped(windows, rules.skipped_window_steps)
    shares = [w.memory_share for w in windows if w.memory_share is not None]
    peak_gb = max(w.peak_memory_gb for w in windows)
    return [
        Verdict(
            "input-bound",
            input_pct <= rules.input_bound_percent,
            f"{input_pct:.0f}% of step time waiting for data (threshold {rules.input_bound_percent:g}%)",
            "raise the reader's parallelism or prefetch, give the input pipeline more CPU threads, or move the "
            "dataset closer (EFS or FastFile): the devices idle while they wait",
        ),
        Verdict(
            "GPUs underused",
            compute_pct >= rules.gpu_underused_percent if on_gpu else None,
            f"{split}; MFU {mfu:.3f} "
            + (f"(threshold: compute at least {rules.gpu_underused_percent:g}%)" if on_gpu else "(no GPU: CPU run)"),
            "fix the largest other share first (input or synchronisation); then raise micro_batch_size, or use "
            "bf16 and XLA for more work per step",
        ),
        Verdict(
            "loss not decreasing",
            None if drop is None else drop >= rules.loss_min_drop_percent,
            "too few log lines"
            if drop is None
            else _loss_fall(steps, losses, rules.loss_window_steps, drop, rules.loss_min_drop_percent),
            "check the learning rate (is it 0 or tiny?) and its warm-up, that the data is not a repeat of a few "
            "records, and that the gradient norm is not clipped to nothing",
        ),
        Verdict(
            "loss not finite",
            worst <= rules.max_skipped_steps,
            f"{skipped} steps skipped for a non-finite loss or gradient, at most {worst} in "
            f"{rules.skipped_window_steps} steps (threshold {rules.max_skipped_steps})",
            "lower the learning rate or raise warm-up, keep grad_clip on, prefer bf16 to fp16",
        ),
        Verdict(
            "stalled",
            longest_gap_s < 60 * rules.stalled_minutes,
            f"longest time between two steps {longest_gap_s:.1f} s (threshold {rules.stalled_minutes:g} min)",
            "a worker waited on input or on the others: check every host's log and the EFS or S3 throughput",
        ),
        Verdict(
            "memory close to full",
            None if not shares else 100 * max(shares) <= rules.memory_percent,
            f"peak {peak_gb:.2f} GB"
            + (f" = {100 * max(shares):.0f}% of the device (threshold {rules.memory_percent:g}%)" if shares else ""),
            "turn on recompute, lower micro_batch_size (raise accumulation to keep the batch), or use more "
            "pipeline stages",
        ),
    ]
