"""What the training loop reports besides its [train] lines: the health of each window, and the report.

Per logging window: the step-time split (``step_timer``), peak memory (``device_memory``), gradient norm,
skipped steps and the loss trend as a ``[health]`` line (metric definitions turn it into CloudWatch
metrics), TensorBoard scalars and a profiler trace (``tensorboard``), and a ``[heartbeat]`` line every
minute (``heartbeat``). Until NCCL has said which network it took, every window reads this host's NCCL log
(``contract/network.py``) and stops the job if it fell back to sockets where EFA is expected. At the end, also
after a failure, the chief writes the HTML report (``report``) with every health rule's verdict (``health``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from contract.health import HealthRules, Verdict, Window, loss_drop_percent, skipped_in_window, verdicts
from contract.network import NCCL_LOG, NetworkCheck, NetworkFallback

from observe.device_memory import PeakMemory
from observe.heartbeat import Heartbeat
from observe.metrics import Evaluation, emit, health_line
from observe.report import write_report
from observe.step_timer import StepTimer, WindowTimes, sync_probe
from observe.tb_log import TensorBoardLog


def health_fields(window: Window, step_s: float, loss_drop_pct: float | None) -> dict[str, float | None]:
    """The numbers of a window's ``[health]`` line, named as the metric definitions parse them."""
    return {
        "input_wait_pct": 100 * window.input_share,
        "compute_pct": 100 * window.compute_share,
        "sync_pct": 100 * window.sync_share,
        "step_s": step_s,
        "grad_norm": window.grad_norm,
        "skipped": window.skipped,
        "peak_mem_gb": window.peak_memory_gb,
        "mem_pct": None if window.memory_share is None else 100 * window.memory_share,
        "loss_drop_pct": loss_drop_pct,
    }


class RunObserver:
    """Args: the hyperparameters, the engine and trainable variables (for the sync probe), whether chief, and the
    tokens one step trains on (the report's tokens axis)."""

    def __init__(self, args, engine, variables: list, is_chief: bool, tokens_per_step: int = 0):
        self.rules = HealthRules.from_json(args.health_rules)
        self.chief = is_chief
        self.timer = StepTimer(sync_probe(engine, variables))
        self.memory = PeakMemory()
        self.heartbeat = Heartbeat(emit if is_chief else None)
        self.tensorboard = TensorBoardLog(
            args.tensorboard_dir if is_chief else None, args.profile_start, args.profile_steps
        )
        self.report_dir = args.tensorboard_dir if is_chief else ""
        self.tokens_per_step = tokens_per_step
        self.windows: list[Window] = []
        self.validation: list[tuple[int, Evaluation]] = []
        self.split: tuple[int, Evaluation] | None = None  # the whole validation split, at the end
        self.skipped = 0  # steps skipped by the end of the last window (the trainer's count)
        self.network = NetworkCheck(
            os.environ.get("SM_CURRENT_INSTANCE_TYPE", "local"),
            len(json.loads(os.environ.get("SM_HOSTS", "[]"))) or engine.workers,  # Horovod's workers: one per GPU
            os.environ.get("NCCL_DEBUG_FILE", NCCL_LOG),
        )

    def start(self) -> None:
        self.heartbeat.start()

    def close(self) -> None:
        """Stops the heartbeat and the profiler; the chief prints the verdicts and writes the report."""
        self.heartbeat.stop()
        self.tensorboard.stop_profiler()
        if self.chief:  # also after a failure: the report shows what led to it
            gap, on_gpu = self.heartbeat.longest_gap_s, self.memory.on_gpu
            network = Verdict("network", self.network.ok, self.network.finding, NetworkCheck.ADVICE)
            results = [*verdicts(self.windows, self.rules, gap, on_gpu), network]
            title = f"Training report: {os.environ.get('TRAINING_JOB_NAME', 'local run')}"
            for verdict in results:
                emit(f"[verdict] {verdict.rule}: {verdict.status}: {verdict.finding}")
            if self.report_dir:
                path = write_report(
                    self.report_dir, title, self.windows, self.validation, results, self.split, self.tokens_per_step
                )
                emit(f"[report] {path}")

    def next_batch(self, batches: Iterator) -> Any:
        return self.timer.next_batch(batches)

    def step(self, step: int, train_step: Callable[[Any], Any], batch: Any) -> Any:
        """Launches ``train_step(batch)``; reads nothing back."""
        self.tensorboard.before_step(step)
        result = train_step(batch)
        self.timer.stepped()
        self.heartbeat.stepped(step)
        self.tensorboard.after_step(step)
        return result

    def pause(self, seconds: float) -> None:
        """Evaluation or a checkpoint just ran for ``seconds``: neither a stall nor step time."""
        self.heartbeat.pause()
        self.timer.paused(seconds)

    def times(self) -> WindowTimes:
        """The window's step-time split (``StepTimer.window``; collective with several replicas): call on every
        worker, once the window's last step has been read."""
        return self.timer.window()

    def window(self, step: int, result, tokens_per_sec: float, mfu: float, times: WindowTimes) -> None:
        """The logging window ending at ``step``, whose last step's figures are ``result`` (already read)."""
        peak, share = self.memory.read()
        skipped, self.skipped = result.skipped_steps - self.skipped, result.skipped_steps
        window = Window(
            step, result.loss, result.learning_rate, tokens_per_sec, mfu, result.grad_norm,
            times.share("input"), times.share("compute"), times.share("sync"), skipped, peak / 1e9, share,
        )  # fmt: skip
        self.windows.append(window)
        self.tensorboard.window(window)
        steps, losses = [w.step for w in self.windows], [w.loss for w in self.windows]
        full = steps[-1] - steps[0] >= 2 * self.rules.loss_window_steps  # the alarm compares whole windows only
        drop = loss_drop_percent(steps, losses, self.rules.loss_window_steps) if full else None
        if self.chief:
            emit(health_line(step, health_fields(window, times.step_s, drop)))
        try:
            self.network.check()  # NCCL connects at the first collective: read until it names its network
        except NetworkFallback as error:
            emit(f"[verdict] network: PROBLEM: {error}")
            raise

    def recently_skipped(self) -> int:
        """Steps skipped in the last ``skipped_window_steps`` (the health rule the loop stops on)."""
        return skipped_in_window(self.windows, self.rules.skipped_window_steps)

    def validated(self, step: int, evaluation: Evaluation) -> None:
        self.validation.append((step, evaluation))
        self.tensorboard.validation(step, evaluation.loss, {s: e.loss for s, e in evaluation.sources.items()})

    def validated_split(self, step: int, evaluation: Evaluation) -> None:
        self.split = step, evaluation
