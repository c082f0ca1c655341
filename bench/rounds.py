"""Two or more measurements taken in alternating rounds, compared round by round.

Each round measures ours and the reference back to back, ours first in even rounds and second in odd ones
(ABC CBA for three), so that neither always runs on a machine warmed or disturbed by the other; their ratio
is that round's figure, and the benchmark reports the median round. On a shared 2-core machine the speed of
the whole machine drifts by 10% or more within a minute: two measurements seconds apart see nearly the same
machine, so their ratio moves far less than either figure does, and the median ignores the rounds a
neighbour disturbed.

    >>> ratio = Ratio([1.31, 1.29, 1.52, 1.30, 0.95])
    >>> f"{ratio.median:.2f}"
    '1.30'
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
from collections.abc import Callable, Iterator


@dataclasses.dataclass(frozen=True)
class Ratio:
    """Per-round ratios (ours / reference, higher is better for ours)."""

    per_round: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.per_round)

    def __str__(self) -> str:
        low, high = min(self.per_round), max(self.per_round)
        return f"{self.median:.3f} (median of {len(self.per_round)} rounds, {low:.3f} to {high:.3f})"


def alternate(rounds: int, *measurements: Callable[[], float]) -> list[list[float]]:
    """``rounds`` results of each measurement, in the order ABC CBA ABC ...; one list per measurement."""
    results: list[list[float]] = [[] for _ in measurements]
    for round_ in range(rounds):
        order = list(enumerate(measurements))
        for index, measure in reversed(order) if round_ % 2 else order:
            results[index].append(measure())
    return results


def rate_ratio(ours: list[float], reference: list[float]) -> Ratio:
    """Per-round ratio of two rates (tokens per second: higher is better)."""
    return Ratio([a / b for a, b in zip(ours, reference, strict=True)])


@contextlib.contextmanager
def one_core() -> Iterator[str]:
    """Keeps this process, and the threads and processes it starts, on the last core it may use; yields where.

    A single-threaded measurement pinned to one core is not moved between cores (and their caches) mid-run.
    Where the system sets no CPU affinity (macOS), nothing is pinned and the placement says so.
    """
    if not hasattr(os, "sched_setaffinity"):
        yield "unpinned (this system sets no CPU affinity)"
        return
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {max(cores)})
    try:
        yield f"on core {max(cores)}"
    finally:
        os.sched_setaffinity(0, cores)
