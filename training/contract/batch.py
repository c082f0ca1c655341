"""The batch arithmetic, in one place: micro-batches per step, and how a pipeline's passes divide them.

    global batch = micro_batch_size x sequence_length x replicas x accumulation steps     (tokens)
    e.g. 524,288 = 8 x 2,048 x 8 x 4
    replicas = devices per host x hosts / pipeline stages (K)

A pipeline (``model_parallel_degree`` > 1) runs a replica's accumulation steps in GPipe passes of
``microbatches`` micro-batches each, so ``microbatches`` must divide them.

Standard library only: train.py, the configuration checks, the estimate and the workflow's Plan step
all use these functions (infra loads this file, ``infra/training_code.py``).
"""

from __future__ import annotations

import math


class BatchError(ValueError):
    """A batch that cannot be split into micro-batches as asked: the field, its value and what would divide."""

    def __init__(self, field: str, value: int, expected: str):
        super().__init__(f"{field} {value:,} is not valid; expected {expected}")
        self.field, self.value, self.expected = field, value, expected


def replicas(devices_per_host: int, hosts: int, stages: int = 1) -> int:
    """Data-parallel replicas: one per ``stages`` pipeline-stage devices, e.g. 8 GPUs x 2 hosts / K = 2 -> 8 (a CPU
    host is one device)."""
    return devices_per_host * hosts // stages


def accumulation_steps(global_batch_tokens: int, micro_batch_size: int, sequence_length: int, replicas: int) -> int:
    """Micro-batches per replica per step so that the global batch holds ``global_batch_tokens`` tokens.

    e.g. 524,288 tokens / (8 sequences x 2,048 tokens x 8 replicas = 131,072) = 4 micro-batches;
    0 tokens: one micro-batch per replica.
    """
    per_micro_step = micro_batch_size * sequence_length * replicas
    if global_batch_tokens <= 0:
        return 1
    if global_batch_tokens % per_micro_step:
        raise BatchError(
            "global_batch_tokens",
            global_batch_tokens,
            f"a multiple of micro_batch_size x sequence_length x replicas = {micro_batch_size} x "
            f"{sequence_length:,} x {replicas} = {per_micro_step:,} tokens",
        )
    return global_batch_tokens // per_micro_step


MAX_BUBBLE = 0.10  # the default micro-batches per GPipe pass keep each device idle at most this share of a pass


def bubble(stages: int, microbatches: int) -> float:
    """The GPipe bubble, the share of a pass each device waits: (K - 1) / (M + K - 1), e.g. K = 8, M = 64: 9.9%."""
    return (stages - 1) / (microbatches + stages - 1)


def pipeline_microbatches(accumulation: int, microbatches: int, stages: int = 1) -> int:
    """Micro-batches per GPipe pass (M): ``microbatches``, which must divide ``accumulation``; 0 chooses it.

    0: the fewest that divide ``accumulation`` and keep the bubble of ``stages`` stages at or below MAX_BUBBLE
    (each stage keeps an input per micro-batch of a pass: fewer is less memory), or all of them where none does;
    without a pipeline (1 stage), all of them. e.g. 128 micro-batches per replica, K = 8 -> 64 (bubble 9.9%);
    16, K = 4 -> 16 (bubble 16%: the least this batch allows); microbatches 8 -> 2 passes of 8.
    """
    if microbatches < 0 or (microbatches and accumulation % microbatches):
        raise BatchError(
            "microbatches",
            microbatches,
            f"0 or a divisor of the {accumulation} micro-batches per replica of a step "
            "(global_batch_tokens / (micro_batch_size x sequence_length x replicas))",
        )
    if microbatches or stages <= 1:
        return microbatches or accumulation
    return next((m for m in _divisors(accumulation) if bubble(stages, m) <= MAX_BUBBLE), accumulation)


def _divisors(n: int) -> list[int]:
    """The divisors of ``n`` in ascending order, in O(sqrt(n)) steps (``n`` may be a billion micro-batches)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def global_batch(micro_batch_size: int, sequence_length: int, replicas: int, accumulation: int) -> int:
    """Tokens per optimizer step: e.g. 8 x 2,048 x 8 x 4 = 524,288."""
    return micro_batch_size * sequence_length * replicas * accumulation


def optimizer_steps(train_tokens: int, global_batch_tokens: int) -> int:
    """Steps to a token budget, the last one reaching past it: e.g. 300 B tokens / 1,048,576 a step = 286,103."""
    return -(-train_tokens // global_batch_tokens)
