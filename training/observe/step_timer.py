"""Where a training step's time goes: waiting for input, computing, synchronising workers.

The loop asks the timer for each batch (input wait: the time ``next`` blocks) and runs each step
through it (compute: until the step's loss is on the host). With several replicas, once per
logging window the timer also times one all-reduce of a gradient-sized buffer (``sync_probe``): the
bandwidth cost of the step's gradient all-reduce plus the wait for the slowest worker. That share is
taken out of compute, since the real all-reduce runs inside the step's graph where the host cannot
time it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class WindowTimes:
    """Mean seconds per step over one logging window, and each part's share of the step (0-1)."""

    steps: int
    input_s: float
    compute_s: float
    sync_s: float

    @property
    def step_s(self) -> float:
        return self.input_s + self.compute_s + self.sync_s

    def share(self, part: str) -> float:
        return getattr(self, f"{part}_s") / self.step_s if self.step_s > 0 else 0.0


class StepTimer:
    """Accumulates input-wait and compute time per step until :meth:`window` is called.

    Args:
        sync_probe: times one all-reduce (seconds); None with a single replica (nothing to synchronise).
    """

    def __init__(self, sync_probe: Callable[[], float] | None = None):
        self._probe = sync_probe
        self._input = self._compute = 0.0
        self._steps = 0

    def next_batch(self, batches: Iterator) -> Any:
        start = time.perf_counter()
        batch = next(batches)
        self._input += time.perf_counter() - start
        return batch

    def step(self, train_step: Callable[[Any], Any], batch: Any) -> Any:
        start = time.perf_counter()
        result = train_step(batch)  # returns host floats: the device work is done
        self._compute += time.perf_counter() - start
        self._steps += 1
        return result

    def window(self) -> WindowTimes:
        """The window's per-step means; starts the next window."""
        steps = max(self._steps, 1)
        sync = min(self._probe(), self._compute / steps) if self._probe else 0.0
        times = WindowTimes(self._steps, self._input / steps, self._compute / steps - sync, sync)
        self._input = self._compute = 0.0
        self._steps = 0
        return times


def sync_probe(engine, variables: list) -> Callable[[], float] | None:
    """A timed all-reduce of zeros shaped like ``variables`` on every replica; None without an all-reduce.

    Every worker must call it at the same step (the loop calls it at each logging step, on every worker).
    """
    if engine.num_replicas < 2 or not hasattr(engine, "sum_over_replicas"):
        return None  # one replica, or the pipeline engine (its all-reduce is per stage, inside the step)

    def replica(_):
        reduced = engine.sum_over_replicas([tf.zeros(v.shape, v.dtype) for v in variables])
        return tf.add_n([tf.reduce_sum(tf.cast(g, tf.float32)) for g in reduced])

    dummy = tf.zeros([engine.local_replicas])
    reduce_once = tf.function(lambda: engine.local(engine.run(replica, (dummy,))))

    def timed() -> float:
        start = time.perf_counter()
        with engine.scope():
            float(reduce_once())
        return time.perf_counter() - start

    timed()  # trace and build the collective outside any measured window
    return timed
