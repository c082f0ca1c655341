"""Splitting a list of weights into contiguous runs, as evenly as possible: which blocks each pipeline stage holds.

Standard library only, and importing nothing of the project: infra's estimate loads this file by path
(``infra/training_code.py``), so the Plan function splits a model exactly as training does.
"""

from __future__ import annotations


def balanced_runs(weights: list[int], stages: int) -> list[range]:
    """Splits ``weights`` into ``stages`` contiguous, non-empty runs: the heaviest run as light as possible, then
    the runs as even as possible (least sum of squares), then the later runs lighter.

    Dynamic programming over "the first j weights in k runs" (n weights: k x n² steps, nothing for n <= 100).
    [5, 1, 1, 1, 1, 1] in 2 runs -> [0:1], [1:6] (5 | 5); [3, 1, 1, 1, 1, 1, 1] in 3 -> [0:1], [1:4], [4:7].
    """
    n = len(weights)
    if not 1 <= stages <= n:
        raise ValueError(f"cannot split {n} blocks into {stages} non-empty stages")
    prefix = [0]
    for weight in weights:
        prefix.append(prefix[-1] + weight)
    # best[k][j] = ((heaviest run, sum of squares), start of the last run) of the best split of weights[:j] into k runs
    best: list[list[tuple[tuple[int, int], int] | None]] = [[None] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = ((0, 0), 0)
    for k in range(1, stages + 1):
        for j in range(k, n + 1):
            for i in range(k - 1, j):  # the k-th run is weights[i:j]
                if best[k - 1][i] is None:
                    continue
                (heaviest, squares), _ = best[k - 1][i]
                run = prefix[j] - prefix[i]
                cost = (max(heaviest, run), squares + run * run)
                if best[k][j] is None or cost <= best[k][j][0]:  # "<=": among equals the last run starts latest
                    best[k][j] = (cost, i)
    runs, end = [], n
    for k in range(stages, 0, -1):
        start = best[k][end][1]
        runs.append(range(start, end))
        end = start
    return runs[::-1]
