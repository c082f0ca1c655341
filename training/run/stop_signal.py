"""SIGTERM as a stop request that every worker acts on at the same step boundary.

SageMaker stops a training job (StopTrainingJob, a spot reclaim, a Step Functions stop or timeout) by sending
SIGTERM and kills the container about 120 s later. The handler only notes the time. After each step every worker
calls ``agreed``: one all-reduce of a 0/1 flag (a single number, so it costs a round trip, not bandwidth), so all
workers see the same answer at the same step, the chief checkpoints that step and everyone leaves.
"""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from run.engines import Engine

STOPPED_EXIT_CODE = 128 + signal.SIGTERM  # 143: what a shell reports for a process ended by SIGTERM


class StopSignal:
    """Installs the SIGTERM handler until ``restore``.

    Example:
        >>> stop = StopSignal(engine)
        >>> for step in steps:
        ...     train_step()
        ...     if stop.agreed():
        ...         break
        >>> stop.restore()
    """

    def __init__(self, engine: Engine):
        self.engine = engine
        self.received_at: float | None = None
        self._previous = signal.signal(signal.SIGTERM, self._note)

    def _note(self, signum, frame) -> None:
        if self.received_at is None:
            self.received_at = time.monotonic()

    def agreed(self) -> bool:
        """Whether any worker has received SIGTERM; every worker must call it at the same point of each step."""
        return self.engine.any_worker(self.received_at is not None)

    def seconds_since(self) -> float:
        """Seconds since this worker's SIGTERM (0 when another worker's stopped it)."""
        return 0.0 if self.received_at is None else time.monotonic() - self.received_at

    def restore(self) -> None:
        signal.signal(signal.SIGTERM, self._previous)
