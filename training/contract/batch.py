"""The batch arithmetic, in one place: micro-batches per step, and how a pipeline's passes divide them.

    global batch = micro_batch_size x sequence_length x replicas x accumulation steps     (tokens)
    e.g. 524,288 = 8 x 2,048 x 8 x 4

A pipeline (``model_parallel_degree`` > 1) runs a replica's accumulation steps in GPipe passes of
``microbatches`` micro-batches each, so ``microbatches`` must divide them.

Standard library only: train.py, the configuration checks, the estimate and the workflow's Plan step
all use these functions (infra loads this file, ``infra/training_code.py``).
"""

from __future__ import annotations


class BatchError(ValueError):
    """A batch that cannot be split into micro-batches as asked: the field, its value and what would divide."""

    def __init__(self, field: str, value: int, expected: str):
        super().__init__(f"{field} {value:,} is not valid; expected {expected}")
        self.field, self.value, self.expected = field, value, expected


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


def pipeline_microbatches(accumulation: int, microbatches: int) -> int:
    """Micro-batches per GPipe pass (M): ``microbatches``, or all of a step's (0); it must divide ``accumulation``.

    e.g. 16 micro-batches per replica, microbatches 8 -> 2 passes of 8; microbatches 0 -> 1 pass of 16.
    """
    if microbatches < 0 or (microbatches and accumulation % microbatches):
        raise BatchError(
            "microbatches",
            microbatches,
            f"0 or a divisor of the {accumulation} micro-batches per replica of a step "
            "(global_batch_tokens / (micro_batch_size x sequence_length x replicas))",
        )
    return microbatches or accumulation


def global_batch(micro_batch_size: int, sequence_length: int, replicas: int, accumulation: int) -> int:
    """Tokens per optimizer step: e.g. 8 x 2,048 x 8 x 4 = 524,288."""
    return micro_batch_size * sequence_length * replicas * accumulation


def optimizer_steps(train_tokens: int, global_batch_tokens: int) -> int:
    """Steps to a token budget, the last one reaching past it: e.g. 300 B tokens / 1,048,576 a step = 286,103."""
    return -(-train_tokens // global_batch_tokens)
