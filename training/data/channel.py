"""Reading the token shards that preprocessing writes (format: ``token_shards.py``) with tf.data.

Training input: one global stream of sequences (``sequence_order.py``: a seeded order that never depends on the
number of workers). Global step N takes sequences [N * B, (N + 1) * B) of it, B the global batch in sequences,
and worker w of W reads the w-th of W equal slices: with ``pread`` of the records it needs (every record of a
shard has the same size, so record i is at a known byte offset), CRCs checked.

One element is everything a worker needs for one optimizer step: [replicas, accumulation, micro_batch,
sequence_length + 1] int32. A resume starts the stream at the checkpoint's sequence index: it seeks, reading
nothing before it, so resuming at step 250,000 costs what resuming at step 10 does, and a resume on another
number of workers continues the same global order.

Evaluation input (``evaluation_dataset``): a fixed sample of the validation split, its files taken one after
another as one list of N sequences and k of them chosen evenly spaced, the i-th at (2i + 1) N // 2k; so each file
holds its share of the sample (k x its sequences / N, within one), and the sample is the same at every evaluation
and however the workers split it. Or the whole split, once: asked for, or when k would be more than N (a sample
drawn with repetition counts a sequence several times, and its standard error is narrower than the data's).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import tensorflow as tf

from data import token_shards
from data.sequence_order import make_order
from data.source_mix import mixed_order

# Shard files kept open between reads (all closed when more are needed). A permuted step reads from nearly as many
# files as it has sequences: 1,024 keeps every shard of a 1 TiB split of 1 GiB shards open (within `ulimit -n`).
OPEN_FILES = 1024
READ_THREADS = 16  # reads in flight at once: os.pread releases the GIL


class DataError(ValueError):
    """A dataset that training cannot use: raised before any compute is spent."""


@dataclasses.dataclass(frozen=True)
class Channel:
    """A split of a dataset: its folder (with tokenizer.json and manifests/), manifest and shard files."""

    root: Path
    split: str
    manifest: token_shards.Manifest
    shards: list[token_shards.ShardInfo]

    @property
    def sequences(self) -> int:
        """The sequences of its shards."""
        return sum(shard.sequences for shard in self.shards)

    @property
    def tokenizer_path(self) -> Path:
        return self.root / token_shards.TOKENIZER_FILE

    @property
    def sources(self) -> list[str]:
        """The sources its shards name, sorted ([""] for a corpus of one source)."""
        return sorted({shard.source for shard in self.shards})

    def of_source(self, source: str) -> Channel:
        """The split of one source: its shards only."""
        return dataclasses.replace(self, shards=[shard for shard in self.shards if shard.source == source])


def open_channel(path: str | Path | None, split: str) -> Channel:
    """Finds the dataset behind a SageMaker channel folder and checks its ``split`` is there and not empty.

    The channel may point at the dataset folder itself or at its ``train/`` or ``validation/`` subfolder.
    """
    if not path:
        raise DataError(f"no {split} channel: set SM_CHANNEL_{split.upper()} or pass --{split}_dir")
    folder = Path(path)
    if not folder.is_dir():
        raise DataError(f"the {split} channel {folder} does not exist")
    root = folder if (folder / token_shards.MANIFESTS_DIR).is_dir() else folder.parent
    try:
        manifest = token_shards.read_manifest(root)
        token_shards.verify_dataset(root, manifest)
    except (FileNotFoundError, ValueError) as error:
        raise DataError(f"the {split} channel {folder} is not a usable dataset: {error}") from error
    shards = [s for s in manifest.split_shards(split) if s.sequences > 0]
    if not shards:
        raise DataError(f"the {split} channel {folder} holds no {split} sequences (manifest lists none)")
    return Channel(root, split, manifest, shards)


class SequenceStream:
    """This worker's slice of each global batch, from any global sequence index, as numpy arrays.

    Args:
        channel: from ``open_channel``.
        take_tokens: tokens kept of each record (sequence_length + 1 <= the shards' record).
        local_batch: sequences this worker reads per step; the global batch is ``local_batch * workers``.
        worker, workers: this worker's index and the number of workers.
        order, seed, window: the order (``sequence_order.make_order``: "permutation", "blocks" or "files").
        source_weights: {source: weight}: a mix of the channel's sources (``source_mix``), each in that order;
            empty: every record in that order.
    """

    def __init__(self, channel: Channel, *, take_tokens: int, local_batch: int, worker: int, workers: int,
                 order: str, seed: int = 0, window: int = 1,
                 source_weights: dict[str, float] | None = None):  # fmt: skip
        manifest = channel.manifest
        shards = sorted(channel.shards, key=lambda shard: shard.file)
        self.paths = [channel.root / shard.file for shard in shards]
        self.dtype = np.dtype(manifest.dtype).newbyteorder("<")
        self.data_bytes = manifest.record_tokens * self.dtype.itemsize
        for shard, path in zip(shards, self.paths, strict=True):
            if path.stat().st_size != shard.sequences * (self.data_bytes + token_shards.FRAMING_BYTES):
                raise DataError(f"{path} does not hold {shard.sequences} records of {manifest.record_tokens} tokens")
        sizes = [shard.sequences for shard in shards]
        if source_weights:
            self.order = mixed_order([shard.source for shard in shards], sizes, source_weights, order=order,
                                     seed=seed, window=window)  # fmt: skip
        else:
            self.order = make_order(sizes, order, seed=seed, window=window)
        self.take_tokens, self.local_batch, self.worker, self.workers = take_tokens, local_batch, worker, workers
        self.records_read = 0
        self._files: dict[int, object] = {}
        self._pool = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="pread")

    def batches(self, start: int = 0) -> Iterator[np.ndarray]:
        """[local_batch, take_tokens] int32 for the global steps from the one whose batch begins at ``start``."""
        position = start + self.worker * self.local_batch
        while True:
            yield self.read(np.arange(position, position + self.local_batch))
            position += self.local_batch * self.workers

    def slices(self, positions: np.ndarray) -> Iterator[np.ndarray]:
        """This worker's slice of each global batch of ``positions`` (a whole number of global batches)."""
        for batch in positions.reshape(-1, self.workers, self.local_batch):
            yield self.read(batch[self.worker])

    def read(self, positions: np.ndarray) -> np.ndarray:
        """The sequences at these global indices, in that order: each run of consecutive records one ``pread``,
        ``READ_THREADS`` of them at a time (a network file system's latency is paid once per round, not per read)."""
        files, records = self.order.locate(positions)
        runs = []  # (file, first record, the positions' indices of its records), one read each
        for file in np.unique(files).tolist():
            wanted = np.flatnonzero(files == file)
            wanted = wanted[np.argsort(records[wanted], kind="stable")]
            runs += [
                (file, int(records[run[0]]), run)
                for run in np.split(wanted, np.flatnonzero(np.diff(records[wanted]) != 1) + 1)
            ]
        handles = self._open(sorted({file for file, _, _ in runs}))

        def fetch(run) -> list[bytes]:
            file, first, indices = run
            return token_shards.read_records(handles[file], first, int(records[indices[-1]]) - first + 1,
                                             self.data_bytes)  # fmt: skip

        rows: list[bytes | None] = [None] * len(positions)
        for (_, first, indices), got in zip(runs, self._pool.map(fetch, runs), strict=True):
            for index in indices:
                rows[index] = got[int(records[index]) - first]
            self.records_read += len(got)
        tokens = np.frombuffer(b"".join(rows), self.dtype).reshape(len(positions), -1)
        return tokens[:, : self.take_tokens].astype(np.int32)  # uint32 ids fit int32 for any real vocabulary

    def _open(self, files: list[int]) -> dict:
        """Open files by index; all are closed first when these would make more than OPEN_FILES."""
        if len(self._files) + sum(f not in self._files for f in files) > OPEN_FILES:
            self.close()
        for file in files:
            if file not in self._files:
                self._files[file] = open(self.paths[file], "rb")  # noqa: SIM115 (kept open between reads)
        return self._files

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


def token_dataset(
    channel: Channel,
    *,
    sequence_length: int,
    batch_shape: tuple[int, ...],
    worker: int = 0,
    workers: int = 1,
    order: str = "permutation",
    seed: int = 0,
    shuffle_buffer: int = 1024,
    start_sequence: int = 0,
    source_weights: dict[str, float] | None = None,
) -> tf.data.Dataset:
    """An endless dataset of token batches shaped ``batch_shape + (sequence_length + 1,)``.

    Args:
        channel: from ``open_channel``.
        sequence_length: model context; records longer than sequence_length + 1 are cut to it.
        batch_shape: leading dimensions of one worker's element, e.g. (replicas, accumulation, micro_batch).
        worker, workers: this worker's index and the number of workers; each reads its slice of a global batch
            of ``workers * prod(batch_shape)`` sequences.
        order: "permutation", "blocks" (``sequence_order.ORDERS``) or "files" (every file in order).
        seed: the order's seed.
        shuffle_buffer: records shuffled together (the window of the "blocks" order).
        start_sequence: global index of the first sequence of the first global batch (resume).
        source_weights: {source: weight} of a mix (``source_mix``); empty: every record in its share.

    Example:
        >>> ds = token_dataset(open_channel(dataset_dir, "train"), sequence_length=32, batch_shape=(1, 4, 8))
        >>> next(iter(ds)).shape  # dataset_dir: a dataset's folder (here the tests' tiny one, of 32-token sequences)
        TensorShape([1, 4, 8, 33])
    """
    check_context(channel, sequence_length)
    shape = (*batch_shape, sequence_length + 1)
    stream = SequenceStream(
        channel, take_tokens=sequence_length + 1, local_batch=math.prod(batch_shape), worker=worker,
        workers=workers, order=order, seed=seed, window=shuffle_buffer, source_weights=source_weights,
    )  # fmt: skip

    def elements() -> Iterator[np.ndarray]:
        for batch in stream.batches(start_sequence):
            yield batch.reshape(shape)

    ds = tf.data.Dataset.from_generator(elements, output_signature=tf.TensorSpec(shape, tf.int32))
    return ds.prefetch(2)  # the next step's batch is read while this one computes


def check_context(channel: Channel, sequence_length: int) -> None:
    if sequence_length > channel.manifest.sequence_length:
        raise DataError(
            f"sequence_length {sequence_length} is longer than the shards' {channel.manifest.sequence_length}: "
            "preprocess again with a longer sequence, or train with a shorter one"
        )


def spread_sample(records: int, count: int) -> np.ndarray:
    """``count`` indices spread evenly over [0, records): the i-th is (2i + 1) records // 2 count (repeats if
    count > records). Any run of r consecutive indices of [0, records) holds r x count / records of them, within 1."""
    return (2 * np.arange(count, dtype=np.int64) + 1) * records // (2 * count)


def evaluation_positions(records: int, size: int, batches: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(sequence index, weight) of each row of an evaluation in global batches of ``size``: ``batches`` of the
    fixed sample (``spread_sample``, each weight 1); or, with ``batches`` None or that sample more than the split's
    ``records``, every sequence once, the last batch filled with the first sequences again, weighted 0."""
    if batches is not None and batches * size <= records:
        return spread_sample(records, batches * size), np.ones(batches * size, np.int32)
    positions = np.arange(-(-records // size) * size)
    return positions % records, (positions < records).astype(np.int32)


def evaluation_dataset(
    channel: Channel,
    *,
    sequence_length: int,
    batch_shape: tuple[int, ...],
    worker: int = 0,
    workers: int = 1,
    batches: int | None = None,
) -> tf.data.Dataset:
    """A finite dataset of evaluation rows shaped ``batch_shape + (sequence_length + 2,)``: each row a sequence's
    ``sequence_length + 1`` tokens and, last, its weight (1; 0 for a row that only fills the last batch).

    Args:
        channel: from ``open_channel`` (the validation split).
        sequence_length, batch_shape, worker, workers: as for ``token_dataset``; a global batch is
            ``workers * prod(batch_shape)`` sequences.
        batches: global batches of the split's fixed sample (``spread_sample``); None, or more than the split
            holds: every sequence once (``evaluation_positions``).
    """
    check_context(channel, sequence_length)
    local_batch = math.prod(batch_shape)
    stream = SequenceStream(channel, take_tokens=sequence_length + 1, local_batch=local_batch, worker=worker,
                            workers=workers, order="files")  # fmt: skip
    positions, weights = evaluation_positions(stream.order.records, local_batch * workers, batches)
    shape = (*batch_shape, sequence_length + 2)
    weight_slices = weights.reshape(-1, workers, local_batch)[:, worker]

    def elements() -> Iterator[np.ndarray]:
        for tokens, weight in zip(stream.slices(positions), weight_slices, strict=True):
            yield np.concatenate([tokens, weight[:, None]], axis=1).reshape(shape)

    return tf.data.Dataset.from_generator(elements, output_signature=tf.TensorSpec(shape, tf.int32)).prefetch(2)
