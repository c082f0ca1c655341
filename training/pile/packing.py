"""Packing a token stream into fixed-length records and writing them to TFRecord shards.

Each shard is written under ``<name>.tmp`` and renamed when complete, so a shard under its final name is whole.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
from data.token_shards import ShardInfo, TFRecordWriter

RECORD_OVERHEAD_BYTES = 16  # TFRecord framing: length, two CRCs


def sequences_per_shard(shard_size_mb: float, record_tokens: int, dtype: str) -> int:
    """How many records make a shard of about ``shard_size_mb`` MiB (at least one)."""
    record_bytes = record_tokens * np.dtype(dtype).itemsize + RECORD_OVERHEAD_BYTES
    return max(1, int(shard_size_mb * (1 << 20)) // record_bytes)


class _HashingFile:
    """A binary file that keeps the SHA-256 of what was written to it."""

    def __init__(self, path: Path):
        self.file = open(path, "wb")  # noqa: SIM115 (closed in close())
        self.sha256 = hashlib.sha256()

    def write(self, data: bytes) -> None:
        self.sha256.update(data)
        self.file.write(data)

    def close(self) -> None:
        # No fsync: the rename guards against a killed process (the page cache survives it); an instance that
        # loses power loses its whole local disk, and with it the job.
        self.file.close()


class SplitWriter:
    """Writes one split of one input: ``<dataset>/<split>/<prefix>-<n>.tfrecord``, n = 00000, 00001, ...

    ``add`` takes token streams in order; ``finish`` pads the last record with end-of-text and returns the shards.
    ``on_shard`` is called after each shard is renamed into place; ``source`` is the mix's source of the input.
    """

    def __init__(
        self,
        dataset_dir: str | Path,
        split: str,
        prefix: str,
        record_tokens: int,
        dtype: str,
        records_per_shard: int,
        eot_id: int,
        on_shard: Callable[[ShardInfo], None] | None = None,
        source: str = "",
    ):
        self.dataset_dir = Path(dataset_dir)
        self.split, self.prefix = split, prefix
        self.record_tokens, self.records_per_shard = record_tokens, records_per_shard
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.eot_id = eot_id
        self.on_shard = on_shard
        self.source = source
        self.shards: list[ShardInfo] = []
        self._pending = np.zeros(0, dtype=self.dtype)
        self._file: _HashingFile | None = None
        self._records = 0
        self._padding = 0

    def add(self, tokens: np.ndarray) -> None:
        stream = np.concatenate((self._pending, tokens.astype(self.dtype, copy=False)))
        full = len(stream) // self.record_tokens
        for i in range(full):
            self._write(stream[i * self.record_tokens : (i + 1) * self.record_tokens])
        self._pending = stream[full * self.record_tokens :].copy()

    def finish(self) -> list[ShardInfo]:
        if len(self._pending):
            padding = self.record_tokens - len(self._pending)
            self._write(np.concatenate((self._pending, np.full(padding, self.eot_id, dtype=self.dtype))), padding)
            self._pending = self._pending[:0]
        if self._file is not None:
            self._close_shard()
        return self.shards

    def _shard_path(self, number: int) -> Path:
        return self.dataset_dir / self.split / f"{self.prefix}-{number:05d}.tfrecord"

    def _write(self, record: np.ndarray, padding: int = 0) -> None:
        if self._file is None:
            path = self._shard_path(len(self.shards))
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = _HashingFile(path.with_name(path.name + ".tmp"))
        TFRecordWriter(self._file).write(record.tobytes())
        self._records += 1
        self._padding += padding
        if self._records == self.records_per_shard:
            self._close_shard()

    def _close_shard(self) -> None:
        assert self._file is not None
        self._file.close()
        path = self._shard_path(len(self.shards))
        os.replace(path.with_name(path.name + ".tmp"), path)
        info = ShardInfo(
            file=path.relative_to(self.dataset_dir).as_posix(),
            split=self.split,
            sequences=self._records,
            tokens=self._records * self.record_tokens - self._padding,
            sha256=self._file.sha256.hexdigest(),
            padding_tokens=self._padding,
            source=self.source,
        )
        self.shards.append(info)
        self._file, self._records, self._padding = None, 0, 0
        if self.on_shard is not None:
            self.on_shard(info)
