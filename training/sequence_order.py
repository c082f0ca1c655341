"""The global order of a split's sequences: which record is sequence number g, for any g, in O(window) work.

Training reads sequence g = 0, 1, 2, ... of an endless stream; global step N takes sequences
[N * B, (N + 1) * B) for a global batch of B sequences, and worker w of W takes the w-th of W equal slices.
The order depends on the dataset, the seed and the window only, never on the number of workers, and the
position of a run is one number (the next g), so a resume on another cluster continues the same stream.

Epoch e = g // records is a permutation of every record, made of two seeded shuffles that need no history:

    1. blocks: each file cut into blocks of ``BLOCK_RECORDS`` consecutive records, the blocks permuted
       (seed, e): neighbours in the stream come from all over the dataset, and reads stay contiguous;
    2. windows: the permuted stream cut into windows of ``window`` records, each window permuted
       (seed, e, window index), so records of one block are spread over the window.

Seeking to g computes its epoch, block and window directly; nothing before it is read again.
"""

from __future__ import annotations

import dataclasses

import numpy as np

BLOCK_RECORDS = 64  # 64 sequences of 2,049 uint16 tokens: a 256 KiB contiguous read


@dataclasses.dataclass(frozen=True)
class Epoch:
    """One epoch's block order: block b holds records [first[b], first[b] + count[b]) of file[b]."""

    file: np.ndarray
    first: np.ndarray
    count: np.ndarray
    start: np.ndarray  # the epoch position of each block's first record


class SequenceOrder:
    """Maps global sequence indices to (file index, record index) pairs.

    Args:
        sequences: records in each file, files in a fixed order (the manifest's, sorted by name).
        seed: the run's seed.
        window: records shuffled together (the shuffle buffer); 1 keeps the permuted block order.
        shuffle: False reads every file in order, one after another (validation).
        block_records: records per block.

    Example:
        >>> order = SequenceOrder([100, 50], seed=1, window=32)
        >>> order.locate(np.arange(1_000_000, 1_000_004))  # 4 sequences far into the stream, found directly
        (array([1, 0, 1, 1]), array([13, 60, 23, 22]))
    """

    def __init__(
        self,
        sequences: list[int],
        *,
        seed: int,
        window: int,
        shuffle: bool = True,
        block_records: int = BLOCK_RECORDS,
    ):
        sizes = np.asarray(sequences, np.int64)
        self.records = int(sizes.sum())
        if self.records == 0:
            raise ValueError("no records to order")
        per_file = -(-sizes // block_records)  # ceil: the last block of a file may be short
        files = np.repeat(np.arange(len(sizes)), per_file)
        firsts = (np.arange(len(files)) - np.repeat(np.cumsum(per_file) - per_file, per_file)) * block_records
        self._blocks = (files, firsts, np.minimum(block_records, sizes[files] - firsts))
        self.seed, self.shuffle = seed, shuffle
        self.window = max(1, window) if shuffle else self.records  # in order: one window, never permuted
        self._epoch: tuple[int, Epoch] | None = None

    def epoch(self, e: int) -> Epoch:
        """The block order of epoch ``e`` (the last one is cached)."""
        if self._epoch is None or self._epoch[0] != e:
            files, firsts, counts = self._blocks
            order = np.random.default_rng([self.seed, 0, e]).permutation(len(files)) if self.shuffle else None
            if order is not None:
                files, firsts, counts = files[order], firsts[order], counts[order]
            self._epoch = e, Epoch(files, firsts, counts, np.cumsum(counts) - counts)
        return self._epoch[1]

    def _window_permutation(self, e: int, w: int) -> np.ndarray:
        size = min(self.window, self.records - w * self.window)  # the epoch's last window may be shorter
        if not self.shuffle:
            return np.arange(size)
        return np.random.default_rng([self.seed, 1, e, w]).permutation(size)

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(file index, record index) of each global sequence index in ``positions``."""
        positions = np.asarray(positions, np.int64)
        files = np.empty(len(positions), np.int64)
        records = np.empty(len(positions), np.int64)
        epochs, in_epoch = np.divmod(positions, self.records)
        windows = in_epoch // self.window
        for e, w in sorted(set(zip(epochs.tolist(), windows.tolist(), strict=True))):
            here = (epochs == e) & (windows == w)
            # Window w of epoch e holds epoch positions [w * window, ...), shuffled among themselves.
            shuffled = w * self.window + self._window_permutation(e, w)[in_epoch[here] - w * self.window]
            epoch = self.epoch(e)
            block = np.searchsorted(epoch.start, shuffled, side="right") - 1
            files[here] = epoch.file[block]
            records[here] = epoch.first[block] + shuffled - epoch.start[block]
        return files, records
