"""Which blocks each pipeline stage holds: the training package's partition (``training/gpt/pipeline/partition.py``).

The same arithmetic, kept here because the estimate runs where ``training/`` is not shipped (the workflow's Plan
Lambda function); ``stages_test.py`` checks that the two agree on every preset and stage count.

    stage 0       token + position embeddings and the first blocks
    stage K - 1   the last blocks and the final LayerNorm (the output projection reuses stage 0's embedding)

The heaviest stage is made as light as possible, then the stages as even as possible, then the later ones lighter.
gpt3-1.3b, 50,257-token vocabulary, 2,048 positions, K = 4: blocks 4 | 7 | 7 | 6 = 308.6 | 352.5 | 352.5 | 302.2 M
parameters (one device: 1,316 M).
"""

from __future__ import annotations

from infra.presets import ModelShape, block_parameters


def balanced_runs(weights: list[int], stages: int) -> list[range]:
    """Contiguous, non-empty runs of ``weights``: least heaviest run, then least sum of squares, then later runs
    lighter (dynamic programming over "the first j weights in k runs")."""
    n = len(weights)
    if not 1 <= stages <= n:
        raise ValueError(f"cannot split {n} blocks into {stages} non-empty stages")
    prefix = [0]
    for weight in weights:
        prefix.append(prefix[-1] + weight)
    best: list[list[tuple[tuple[int, int], int] | None]] = [[None] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = ((0, 0), 0)
    for k in range(1, stages + 1):
        for j in range(k, n + 1):
            for i in range(k - 1, j):
                if best[k - 1][i] is None:
                    continue
                (heaviest, squares), _ = best[k - 1][i]
                run = prefix[j] - prefix[i]
                cost = (max(heaviest, run), squares + run * run)
                if best[k][j] is None or cost <= best[k][j][0]:
                    best[k][j] = (cost, i)
    runs, end = [], n
    for k in range(stages, 0, -1):
        start = best[k][end][1]
        runs.append(range(start, end))
        end = start
    return runs[::-1]


def stage_layers(shape: ModelShape, vocab_size: int, sequence_length: int, stages: int) -> list[int]:
    """Blocks per stage. gpt3-1.3b, V = 50,257, T = 2,048, K = 4 -> [4, 7, 7, 6]."""
    weights = [block_parameters(shape.d_model)] * shape.n_layer
    weights[0] += (vocab_size + sequence_length) * shape.d_model
    weights[-1] += 2 * shape.d_model
    return [len(run) for run in balanced_runs(weights, stages)]


def stage_parameters(shape: ModelShape, vocab_size: int, sequence_length: int, stages: int) -> list[int]:
    """Parameters on each stage's device: its blocks, the embeddings on the first, the final LayerNorm on the last."""
    d = shape.d_model
    counts = [n * block_parameters(d) for n in stage_layers(shape, vocab_size, sequence_length, stages)]
    counts[0] += (vocab_size + sequence_length) * d
    counts[-1] += 2 * d
    return counts
