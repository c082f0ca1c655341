"""Searching nearby layouts: the smallest changes that make an estimate fit, and the cheapest layout per instance type.

The search space around an estimate: recomputation on, a smaller micro-batch (one that still divides the global
batch), a larger model-parallel degree (a divisor of the GPUs per instance), and an instance type with more
memory per device and at least as many of them (same instance count, so the cluster does not shrink), of the
same kind: GPU types for a GPU run, CPU types for a CPU one.
A few hundred estimates at most; each is arithmetic only.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from infra.estimate.compute import recompute_flops_per_token
from infra.estimate.estimate import (
    Estimate,
    EstimateInputs,
    TrainingFields,
    estimate_for_config,
    estimate_inputs,
)
from infra.estimate.hardware import usable_bytes
from infra.estimate.memory import GIB, RECOMPUTE_MODES, Memory, recompute_mode
from infra.instances import CPU_TRAINING_TYPES, GPU_TRAINING_TYPES, INSTANCE_TYPES


@dataclasses.dataclass(frozen=True)
class Suggestion:
    """A change of one or more training fields and the estimate it leads to."""

    changes: tuple[tuple[str, Any], ...]
    estimate: Estimate

    def __str__(self) -> str:
        fields = " and ".join(f"training.{name} = {_json(value)}" for name, value in self.changes)
        p = self.estimate
        return (
            f"{fields} ({p.memory.total / GIB:.1f} of {p.capacity_bytes / GIB:.1f} GiB usable, "
            f"{p.train_days:,.1f} days modelled, ${p.cost_on_demand:,.0f} on demand)"
        )


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _layouts(inputs: EstimateInputs, instance_types: Iterable[str]) -> Iterator[Estimate]:
    """Every runnable layout with recompute as is or on, micro-batch at most the given one, any model-parallel
    degree at least the given one and, with a pipeline, GPipe passes of M = 2K or 4K micro-batches besides the given
    M (fewer in flight: GPipe's last stage keeps every one's softmax), on each of ``instance_types``."""
    for name in instance_types:
        instance = INSTANCE_TYPES[name]
        if inputs.precision == "bf16" and not instance.supports_bf16:
            continue
        recomputes = [inputs.recompute] + ([True] if recompute_mode(inputs.recompute) != "full" else [])
        sequences = inputs.global_batch_tokens // inputs.sequence_length  # a micro-batch divides the global batch
        for recompute, micro_batch, degree in itertools.product(
            recomputes,
            [m for m in range(min(inputs.micro_batch_size, sequences), 0, -1) if sequences % m == 0],
            [k for k in _divisors(instance.devices) if k >= inputs.model_parallel_degree],
        ):
            passes = [inputs.microbatches] + ([2 * degree, 4 * degree] if degree > 1 else [])
            for microbatches in dict.fromkeys(passes):
                candidate = dataclasses.replace(
                    inputs,
                    instance_type=name,
                    recompute=recompute,
                    micro_batch_size=micro_batch,
                    model_parallel_degree=degree,
                    microbatches=microbatches,
                )
                try:
                    yield estimate_inputs(candidate)
                except ValueError:
                    continue  # e.g. the micro-batch no longer divides the global batch


# The order changes are offered in: what costs least to try first.
FIELDS = ("recompute", "micro_batch_size", "model_parallel_degree", "microbatches", "instance_type")


def _changes(before: EstimateInputs, after: EstimateInputs) -> tuple[tuple[str, object], ...]:
    return tuple((n, getattr(after, n)) for n in FIELDS if getattr(after, n) != getattr(before, n))


def suggestions(given: Estimate) -> list[Suggestion]:
    """The smallest changes that make ``given`` fit (none when it fits): for each set of changed fields, its best
    fitting layout, fewest changes first, then in ``FIELDS`` order (recomputation, micro-batch, pipeline stages,
    instance type), the way one would try them by hand.

    Within one set the cheapest run wins, then the layout closest to the original: the largest micro-batch,
    the smallest model-parallel degree.
    """
    if given.fits:
        return []
    inputs = given.inputs
    current = inputs.instance
    same_kind = GPU_TRAINING_TYPES if current.is_gpu else CPU_TRAINING_TYPES  # a CPU (e.g. local) run stays on CPUs
    larger = [
        name
        for name in same_kind
        if usable_bytes(INSTANCE_TYPES[name]) > usable_bytes(current)
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


def least_recompute(inputs: EstimateInputs) -> str | None:
    """The recompute mode that executes the fewest FLOPs and fits (``compute.recompute_flops_per_token``: none
    first, full last; the attention's before the MLP's while s < 2d); None when not even full recomputation fits."""
    extra = {m: recompute_flops_per_token(inputs.shape, inputs.sequence_length, m) for m in RECOMPUTE_MODES}
    for mode in sorted(RECOMPUTE_MODES, key=extra.__getitem__):
        try:
            if estimate_inputs(dataclasses.replace(inputs, recompute=mode)).fits:
                return mode
        except ValueError:
            return None
    return None


def with_suggestions(given: Estimate) -> dict[str, Any]:
    """``Estimate.as_dict`` with the suggestions, as text (``python -m infra.estimate --json``)."""
    return given.as_dict() | {"suggestions": [str(s) for s in suggestions(given)]}


def fit_problem(training: TrainingFields, vocab_size: int) -> str | None:
    """None when the configuration fits; otherwise a sentence: what is needed, what there is, the smallest fixes.

    E.g. "gpt3-125m at micro-batch 8 x 2048 tokens needs 43.7 GiB per device (...), but ml.p4d.24xlarge has 40 GiB.
    Set training.recompute = true (...); or ..."
    """
    result = estimate_for_config(training, vocab_size)
    if result.fits:
        return None
    need, have = result.memory.total / GIB, result.capacity_bytes / GIB
    problem = (
        f"{training.model_preset} at micro-batch {training.micro_batch_size} x {training.sequence_length} tokens "
        f"needs {need:.1f} GiB per device ({_breakdown(result.memory)}), but {training.instance_type} has "
        f"{have:.1f} GiB usable per device ({result.inputs.instance.device_memory_gib} GiB marketed)."
    )
    fixes = suggestions(result)[:3]
    if not fixes:
        return f"{problem} No layout the estimate tries fits: choose a smaller model or micro-batch."
    return f"{problem} Set " + "; or ".join(str(s) for s in fixes) + "."


def _breakdown(memory: Memory) -> str:
    return (
        f"model state {memory.model_state / GIB:.1f}, activations {memory.activations / GIB:.1f}, "
        f"logits {memory.logits / GIB:.1f}, fragmentation {memory.overhead / GIB:.1f}"
    )


def _json(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value) if isinstance(value, str) else str(value)
