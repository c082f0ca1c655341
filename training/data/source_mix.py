"""A weighted mix of sources: which source, and which sequence of that source's own stream, is global sequence g.

Each source has its own endless stream: its records in the split's per-epoch order (``sequence_order``) over that
source's shards alone. The mix takes from the streams by weight, so a small source repeats (more epochs of it)
and a large one is subsampled (part of an epoch), and any g is found directly, with no history:

    a period of ``PERIOD`` slots; source s gets c_s = round(w_s x PERIOD) of them (largest remainder; a weight
    that would get none is refused). Its k-th slot ideally sits at (k + 1/2) x PERIOD / c_s; the slots are laid
    out in the order of those ideal positions (ties: the source first in name order). Slot j of period q holding
    the k-th slot of s is sequence q x c_s + k of s's stream.

The stream depends on the weights, the sources' records and the seed only, never on the number of workers, so a
resume or a resize continues it exactly as without a mix.

Proportions. In the first n slots source s has floor or ceil of (n x c_s / PERIOD) within 1/2 + S x c_s / (2 x
PERIOD) (S sources: n slots end at an ideal position t with every source within 1/2 of t x c_s), so any window
of L consecutive sequences, across periods too, holds L x w_s of s within ``window_bound(w_s, S, L)`` =
1 + S x w_s + L / PERIOD (the rounding of c_s adds at most L / PERIOD). Two sources, 1,000 sequences: within 3.02,
where drawing each sequence at random would give a standard deviation of up to 15.8.
"""

from __future__ import annotations

import numpy as np
from contract.hparams import MIX_PERIOD as PERIOD  # slots of the layout: a weight's rounding costs 1 per 65,536

from data.sequence_order import make_order


def window_bound(weight: float, sources: int, window: int) -> float:
    """The most that the sequences of a source in any ``window`` consecutive ones differ from weight x window."""
    return 1 + sources * weight + window / PERIOD


def slot_counts(weights: list[float], period: int = PERIOD) -> np.ndarray:
    """Slots of each source in a period: the largest-remainder rounding of the normalised weights x ``period``."""
    shares = np.asarray(weights, np.float64) / np.sum(weights) * period
    counts = np.floor(shares).astype(np.int64)
    remainders = shares - counts
    counts[np.argsort(-remainders, kind="stable")[: period - int(counts.sum())]] += 1
    if np.any(counts == 0):
        raise ValueError(f"a weight's share is below 1 / {period:,}: no sequence of it in {period:,}")
    return counts


def check_weights(weights: dict[str, float], sources: list[str]) -> None:
    """ValueError, one line naming ``source_weights``, unless ``weights`` names every source of the split's shards
    (``sources``, one a shard) and no other."""
    present = sorted(set(sources))
    if present == [""]:
        raise ValueError(
            "source_weights: the train split's shards name no source (a corpus of one source): leave it empty"
        )
    unknown = sorted(set(weights) - set(present))
    if unknown:
        raise ValueError(
            f"source_weights: {', '.join(unknown)} is no source of the train split (its sources: "
            f"{', '.join(present)}): weight each of those once"
        )
    missing = [name or '""' for name in present if name not in weights]
    if missing:
        raise ValueError(
            f"source_weights: the train split's source {', '.join(missing)} has no weight: weight every one of "
            f"{', '.join(present)}"
        )


class MixedOrder:
    """Maps global sequence indices to (file index, record index) pairs through a weighted mix of sources.

    Args:
        orders: each source's own order (``sequence_order.make_order`` over its files), sources in name order.
        files: each source's file indices in the stream's list of files (its order's file 0, 1, ...).
        weights: each source's weight (normalised here).

    Example:
        >>> from data.sequence_order import PermutedOrder
        >>> mix = MixedOrder([PermutedOrder([10], seed=1), PermutedOrder([500], seed=1)], [[1], [0]], [3.0, 1.0])
        >>> mix.source_index(np.arange(8))  # a quarter from the large source, three quarters from the small
        (array([0, 0, 1, 0, 0, 0, 1, 0]), array([0, 1, 0, 2, 3, 4, 1, 5]))
    """

    def __init__(self, orders: list, files: list[list[int]], weights: list[float]):
        self.orders, self.files = orders, [np.asarray(f, np.int64) for f in files]
        self.counts = slot_counts(weights)
        self.records = sum(order.records for order in orders)
        sources = np.repeat(np.arange(len(self.counts)), self.counts)
        ranks = np.arange(PERIOD) - np.repeat(np.cumsum(self.counts) - self.counts, self.counts)
        layout = np.lexsort((sources, (2 * ranks + 1) / (2 * self.counts[sources])))  # ideal position, then name
        self.slot_source, self.slot_rank = sources[layout], ranks[layout]

    def source_index(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(source, index in that source's stream) of each global sequence index."""
        periods, slots = np.divmod(np.asarray(positions, np.int64), PERIOD)
        sources = self.slot_source[slots]
        return sources, periods * self.counts[sources] + self.slot_rank[slots]

    def sequences(self, n: int) -> np.ndarray:
        """The sequences each source gives to the first ``n`` of the stream."""
        periods, rest = divmod(n, PERIOD)
        return periods * self.counts + np.bincount(self.slot_source[:rest], minlength=len(self.counts))

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(file index, record index) of each global sequence index in ``positions``."""
        sources, indices = self.source_index(positions)
        files = np.empty(len(sources), np.int64)
        records = np.empty(len(sources), np.int64)
        for s in np.unique(sources).tolist():
            here = sources == s
            local, records[here] = self.orders[s].locate(indices[here])
            files[here] = self.files[s][local]
        return files, records


def mixed_order(sources: list[str], sequences: list[int], weights: dict[str, float], *, order: str, seed: int,
                window: int) -> MixedOrder:  # fmt: skip
    """The mix of files' sources (``sources``, ``sequences``: each file's source and records, files in the stream's
    order) by ``weights``; each source's own stream the order ``order`` (``sequence_order.make_order``) of its files.
    """
    check_weights(weights, sources)
    names = sorted(weights)
    files = [[i for i, source in enumerate(sources) if source == name] for name in names]
    orders = [make_order([sequences[i] for i in f], order, seed=seed, window=window) for f in files]
    return MixedOrder(orders, files, [weights[name] for name in names])


def mix_plan(
    sources: list[str], sequences: list[int], weights: dict[str, float], run: int
) -> list[tuple[str, float, int, float]]:
    """(name, weight normalised, sequences it gives to the first ``run`` of the stream, epochs of its records they
    are) of each source, by name; ``sources``, ``sequences`` as for ``mixed_order``."""
    mix = mixed_order(sources, sequences, weights, order="permutation", seed=0, window=1)
    names, shares = sorted(weights), mix.counts / PERIOD
    return [
        (name, float(shares[s]), int(n), int(n) / mix.orders[s].records)
        for s, (name, n) in enumerate(zip(names, mix.sequences(run), strict=True))
    ]
