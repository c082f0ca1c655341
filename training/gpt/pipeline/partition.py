"""Which blocks each pipeline stage holds: contiguous runs of blocks, balanced by parameter count.

    stage 0       token + position embeddings, blocks 0 .. a_1 - 1
    stage k       blocks a_k .. a_{k+1} - 1
    stage K - 1   blocks a_{K-1} .. L - 1, final LayerNorm, and the output projection, which reuses the token
                  embedding (tied weights) that stage 0 holds

Every stage holds at least one block. The heaviest stage is made as light as possible, then the stages as even
as possible; among equal splits the later stages are lighter (the last one also computes the vocabulary-wide
logits).

gpt3-1.3b (d = 2048, a block = 12d² + 13d = 50.4 M) with a 50,257-token vocabulary and 2,048 positions:
embeddings = (50,257 + 2,048) x 2048 = 107.1 M, 2.1 blocks' worth. K = 4 -> blocks 4 | 7 | 7 | 6:
stage 0 = 107.1 + 4 x 50.4 = 308.6 M, stages 1 and 2 = 352.6 M, stage 3 = 302.2 M (one device would hold 1,316 M).

The split itself is ``contract/balance.py``'s, which the estimate (``infra/estimate/stages.py``) loads too; the
per-block formula is ``contract/presets.py``'s.
"""

from __future__ import annotations

from contract.balance import balanced_runs
from contract.presets import block_parameters


def stage_blocks(n_layer: int, d_model: int, vocab_size: int, sequence_length: int, stages: int) -> list[range]:
    """The blocks of each of ``stages`` pipeline stages of a GPT, embeddings counted on stage 0 and the final
    LayerNorm (2d) on the last. gpt3-1.3b, V = 50,257, T = 2,048, 4 stages -> [0:4], [4:11], [11:18], [18:24]."""
    weights = [block_parameters(d_model)] * n_layer
    weights[0] += (vocab_size + sequence_length) * d_model
    weights[-1] += 2 * d_model
    return balanced_runs(weights, stages)


def stage_parameters(n_layer: int, d_model: int, vocab_size: int, sequence_length: int, stages: int) -> list[int]:
    """Parameters held by each stage's device (the tied output projection adds none to the last)."""
    per_block = block_parameters(d_model)
    counts = []
    for k, blocks in enumerate(stage_blocks(n_layer, d_model, vocab_size, sequence_length, stages)):
        count = len(blocks) * per_block
        count += (vocab_size + sequence_length) * d_model if k == 0 else 0
        count += 2 * d_model if k == stages - 1 else 0
        counts.append(count)
    return counts
