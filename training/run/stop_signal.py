"""SIGTERM as a stop request that every worker acts on at the same step boundary.

SageMaker stops a training job (StopTrainingJob, a spot reclaim, a Step Functions stop or timeout) by sending
SIGTERM and kills the container about 120 s later. The handler only notes the time. Every worker calls
``agreed`` after each step; with several workers it asks the others only every few steps: one small all-reduce
of [stop flag, seconds per step], which the host waits for, so not every step. The workers all see the same sums,
so they agree on the answer and on when to ask next: after the steps that last about ``POLL_SECONDS`` at the
workers' mean pace. A stop then waits at most that long, plus a step, before the chief checkpoints.
"""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from run.engines import Engine

STOPPED_EXIT_CODE = 128 + signal.SIGTERM  # 143: what a shell reports for a process ended by SIGTERM
# Training between two polls: with the checkpoint's save (seconds, docs/estimate.md) well inside the 120 s that
# SageMaker leaves between SIGTERM and the kill.
POLL_SECONDS = 10.0


class StopSignal:
    """Installs the SIGTERM handler until ``restore``.

    Args:
        engine: the run's engine (its workers agree through ``sum_over_workers``).
        poll_seconds: about how much training passes between two polls of the other workers.

    Usage (an engine as ``run.loop`` makes it)::

        stop = StopSignal(engine)
        for step in steps:
            train_step()
            if stop.agreed():
                break
        stop.restore()
    """

    def __init__(self, engine: Engine, poll_seconds: float = POLL_SECONDS):
        self.engine, self.poll_seconds = engine, poll_seconds
        self.received_at: float | None = None
        self.interval = 1  # steps between two polls: the first after one step, which measures the pace
        self._steps, self._since = 0, time.monotonic()
        self._previous = signal.signal(signal.SIGTERM, self._note)

    def _note(self, signum, frame) -> None:
        if self.received_at is None:
            self.received_at = time.monotonic()

    def agreed(self) -> bool:
        """Whether any worker has received SIGTERM; every worker calls it after every step."""
        if self.engine.workers == 1:
            return self.received_at is not None  # no one to ask: free every step
        self._steps += 1
        if self._steps < self.interval:
            return False
        pace = (time.monotonic() - self._since) / self._steps  # seconds per step since the last poll
        stops, paces = self.engine.sum_over_workers([float(self.received_at is not None), pace])
        self.interval = max(1, int(self.poll_seconds / max(paces / self.engine.workers, 1e-9)))
        self._steps, self._since = 0, time.monotonic()
        return stops > 0

    def seconds_since(self) -> float:
        """Seconds since this worker's SIGTERM (0 when another worker's stopped it)."""
        return 0.0 if self.received_at is None else time.monotonic() - self.received_at

    def restore(self) -> None:
        signal.signal(signal.SIGTERM, self._previous)
