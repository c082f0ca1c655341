"""Where a training step's time goes: waiting for input, computing, synchronising workers.

The host only launches steps; it learns that the device is done when it reads a step's figures, which the loop
does once a logging window. So the timer times whole windows: from the end of the last window to the read at the
end of this one, less the pauses the loop reports (evaluation, checkpoints). Of that, input wait is the time
``next`` blocks on the input pipeline; the rest is compute. With several replicas, once per window the timer
also times what the step's gradient all-reduce costs (``sync_probe``), which runs inside the step's graph where
the host cannot time it; that share is taken out of compute.
"""

from __future__ import annotations

import dataclasses
import math
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
    """Accumulates a window's input wait and pauses until :meth:`window` is called.

    Args:
        sync_probe: times the step's all-reduce (seconds); None with a single replica (nothing to synchronise).
    """

    def __init__(self, sync_probe: Callable[[], float] | None = None):
        self._probe = sync_probe
        self._start = time.perf_counter()
        self._input = self._paused = 0.0
        self._steps = 0

    def next_batch(self, batches: Iterator) -> Any:
        start = time.perf_counter()
        batch = next(batches)
        self._input += time.perf_counter() - start
        return batch

    def stepped(self) -> None:
        self._steps += 1

    def paused(self, seconds: float) -> None:
        """Time the loop spent on something else than training (evaluation, a checkpoint): not step time."""
        self._paused += seconds

    def window(self) -> WindowTimes:
        """The window's per-step means; starts the next window. Call after reading the window's last step."""
        steps = max(self._steps, 1)
        elapsed = time.perf_counter() - self._start - self._paused
        compute = max(elapsed - self._input, 0.0) / steps
        sync = min(self._probe(), compute) if self._probe else 0.0
        times = WindowTimes(self._steps, self._input / steps, compute - sync, sync)
        self._start = time.perf_counter()  # after the probe: it is no step's time
        self._input = self._paused = 0.0
        self._steps = 0
        return times


def sync_probe(engine, variables: list) -> Callable[[], float] | None:
    """Times what one step's gradient all-reduce costs; None without an all-reduce.

    Two small all-reduces, not one of the gradients' size (gpt3-1.3b: 5.3 GB of float32 zeros, twice that while
    reduced): one number, which waits for the slowest worker, then one pack of the engine's ``bytes_per_pack``,
    timed and multiplied by the packs the gradients fill. Every worker must call it at the same step (the loop
    calls it at each logging step, on every worker).
    """
    if engine.num_replicas < 2 or not hasattr(engine, "sum_over_replicas"):
        return None  # one replica, or the pipeline engine (its all-reduce is per stage, inside the step)
    gradient_bytes = sum(4 * v.shape.num_elements() for v in variables)  # float32 on the wire (engines.WIRE_DTYPE)
    packs = math.ceil(gradient_bytes / engine.bytes_per_pack)
    pack = min(engine.bytes_per_pack, gradient_bytes) // 4

    def reduce_once(size: int) -> Callable[[], tf.Tensor]:
        def replica(_):
            return tf.reduce_sum(engine.sum_over_replicas(tf.zeros([size], tf.float32)))

        dummy = tf.zeros([engine.local_replicas])
        return tf.function(lambda: engine.local(engine.run(replica, (dummy,))))

    wait, bandwidth = reduce_once(1), reduce_once(pack)

    def seconds(reduce: Callable[[], tf.Tensor]) -> float:
        start = time.perf_counter()
        with engine.scope():
            float(reduce())
        return time.perf_counter() - start

    def timed() -> float:
        return seconds(wait) + packs * seconds(bandwidth)

    timed()  # trace and build the collectives outside any measured window
    return timed
