"""Which blocks each pipeline stage holds: the training package's partition (``training/gpt/pipeline/partition.py``).

The split is training's own ``contract/balance.py``, loaded by path (the estimate also runs in the workflow's
Plan Lambda function, where TensorFlow is not); ``stages_test.py`` checks that both agree on every preset and
stage count.

    stage 0       token + position embeddings and the first blocks
    stage K - 1   the last blocks and the final LayerNorm (the output projection reuses stage 0's embedding)

The heaviest stage is made as light as possible, then the stages as even as possible, then the later ones lighter.
gpt3-1.3b, 50,257-token vocabulary, 2,048 positions, K = 4: blocks 4 | 7 | 7 | 6 = 308.6 | 352.5 | 352.5 | 302.2 M
parameters (one device: 1,316 M).
"""

from __future__ import annotations

import functools

from infra.training_code import ModelShape, training_module


@functools.cache  # a layout search asks for the same split hundreds of times
def stage_layers(shape: ModelShape, vocab_size: int, sequence_length: int, stages: int) -> list[int]:
    """Blocks per stage. gpt3-1.3b, V = 50,257, T = 2,048, K = 4 -> [4, 7, 7, 6]."""
    presets = training_module("presets")
    weights = [presets.shape_block_parameters(shape)] * shape.n_layer
    weights[0] += presets.input_parameters(shape, vocab_size, sequence_length)
    weights[-1] += presets.output_parameters(shape, vocab_size)
    return [len(run) for run in training_module("balance").balanced_runs(weights, stages)]


def stage_parameters(shape: ModelShape, vocab_size: int, sequence_length: int, stages: int) -> list[int]:
    """Parameters on each stage's device: its blocks, the embeddings on the first, the final norm (and a Llama's
    untied head) on the last."""
    presets = training_module("presets")
    block = presets.shape_block_parameters(shape)
    counts = [n * block for n in stage_layers(shape, vocab_size, sequence_length, stages)]
    counts[0] += presets.input_parameters(shape, vocab_size, sequence_length)
    counts[-1] += presets.output_parameters(shape, vocab_size)
    return counts
