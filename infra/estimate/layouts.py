"""Searching nearby layouts: the smallest changes that make an estimate fit, and the cheapest layout per instance type.

The search space around an estimate: recomputation on, a smaller micro-batch (one that still divides the global
batch), a larger model-parallel degree (a divisor of the GPUs per instance), and an instance type with more
memory per device and at least as many of them (same instance count, so the cluster does not shrink).
A few hundred estimates at most; each is arithmetic only.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator

from infra.estimate.estimate import Estimate, EstimateInputs, Suggestion, estimate_inputs
from infra.instances import GPU_TRAINING_TYPES, INSTANCE_TYPES


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _layouts(inputs: EstimateInputs, instance_types: Iterable[str]) -> Iterator[Estimate]:
    """Every runnable layout with recompute as is or on, micro-batch at most the given one, any model-parallel
    degree at least the given one, on each of ``instance_types``."""
    for name in instance_types:
        instance = INSTANCE_TYPES[name]
        if inputs.precision == "bf16" and not instance.supports_bf16:
            continue
        for recompute, micro_batch, degree in itertools.product(
            sorted({inputs.recompute, True}),
            range(inputs.micro_batch_size, 0, -1),
            [k for k in _divisors(instance.devices) if k >= inputs.model_parallel_degree],
        ):
            candidate = dataclasses.replace(
                inputs,
                instance_type=name,
                recompute=recompute,
                micro_batch_size=micro_batch,
                model_parallel_degree=degree,
            )
            try:
                yield estimate_inputs(candidate)
            except ValueError:
                continue  # e.g. the micro-batch no longer divides the global batch


# The order changes are offered in: what costs least to try first.
FIELDS = ("recompute", "micro_batch_size", "model_parallel_degree", "instance_type")


def _changes(before: EstimateInputs, after: EstimateInputs) -> tuple[tuple[str, object], ...]:
    return tuple((n, getattr(after, n)) for n in FIELDS if getattr(after, n) != getattr(before, n))


def suggestions(inputs: EstimateInputs) -> list[Suggestion]:
    """For each set of changed fields, its best fitting layout: fewest changes first, then in ``FIELDS`` order
    (recomputation, micro-batch, pipeline stages, instance type), the way one would try them by hand.

    Within one set the cheapest run wins, then the layout closest to the original: the largest micro-batch,
    the smallest model-parallel degree.
    """
    current = inputs.instance
    larger = [
        name
        for name in GPU_TRAINING_TYPES
        if INSTANCE_TYPES[name].device_memory_gib > current.device_memory_gib
        and INSTANCE_TYPES[name].devices >= current.devices
    ]
    best: dict[tuple[str, ...], Estimate] = {}
    for candidate in _layouts(inputs, [inputs.instance_type, *larger]):
        changes = _changes(inputs, candidate.inputs)
        if not candidate.fits or not changes:
            continue
        key = tuple(name for name, _ in changes)
        if key not in best or _rank(candidate) < _rank(best[key]):
            best[key] = candidate
    ordered = sorted(best.items(), key=lambda item: (len(item[0]), [FIELDS.index(n) for n in item[0]]))
    return [Suggestion(_changes(inputs, p.inputs), p) for _, p in ordered]


def _rank(p: Estimate) -> tuple[float, int, int]:
    return (round(p.cost_on_demand, 2), -p.inputs.micro_batch_size, p.inputs.model_parallel_degree)


def cheapest_fitting(inputs: EstimateInputs, instance_type: str) -> Estimate | None:
    """The cheapest layout of ``inputs`` on ``instance_type`` that fits (recompute, micro-batch, pipeline free)."""
    fitting = [p for p in _layouts(inputs, [instance_type]) if p.fits]
    return min(fitting, key=_rank, default=None)
