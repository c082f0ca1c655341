"""Reading the token shards that preprocessing writes (format: ``token_shards.py``) with tf.data.

Training input, per worker:

    shard files (this worker's share) -> seeded file shuffle -> repeat
      -> interleaved parallel TFRecord reads -> seeded record shuffle
      -> batch raw records (drop_remainder) -> decode_raw the whole batch at once -> prefetch

One element is everything a worker needs for one optimizer step: [replicas, accumulation, micro_batch,
sequence_length + 1] int32. Resuming skips the elements already consumed, so the order after a
restart is the order an uninterrupted run would have seen.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import tensorflow as tf
import token_shards


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
    def tokenizer_path(self) -> Path:
        return self.root / token_shards.TOKENIZER_FILE


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


def worker_files(shards: list[token_shards.ShardInfo], root: Path, worker: int, workers: int) -> tuple[list[str], bool]:
    """This worker's shard files, and whether records (not files) must be split between workers.

    With at least one file per worker, worker w reads files w, w + workers, ...; otherwise every worker
    reads every file and keeps every workers-th record.
    """
    files = [str(root / s.file) for s in sorted(shards, key=lambda s: s.file)]
    if workers > 1 and len(files) >= workers:
        return files[worker::workers], False
    return files, workers > 1


def _decoder(manifest: token_shards.Manifest, take_tokens: int):
    # uint32 ids fit int32 for any real vocabulary (< 2^31), and decode_raw reads them bit for bit.
    raw_type = tf.uint16 if manifest.dtype == "uint16" else tf.int32

    def decode(records: tf.Tensor) -> tf.Tensor:
        tokens = tf.io.decode_raw(records, raw_type, little_endian=True)  # [batch, sequence_length + 1]
        return tf.cast(tokens[:, :take_tokens], tf.int32)

    return decode


def token_dataset(
    channel: Channel,
    *,
    sequence_length: int,
    batch_shape: tuple[int, ...],
    worker: int = 0,
    workers: int = 1,
    shuffle: bool = True,
    seed: int = 0,
    shuffle_buffer: int = 1024,
    skip_batches: int = 0,
    cycle_length: int = 8,
) -> tf.data.Dataset:
    """An endless dataset of token batches shaped ``batch_shape + (sequence_length + 1,)``.

    Args:
        channel: from ``open_channel``.
        sequence_length: model context; records longer than sequence_length + 1 are cut to it.
        batch_shape: leading dimensions of one element, e.g. (replicas, accumulation, micro_batch).
        worker, workers: this worker's index and the number of workers that read in parallel.
        shuffle: shuffle file order and records (training); validation reads in order.
        seed: shuffle seed; with TensorFlow's global seed (train.py sets both from --seed), it fixes the order.
        shuffle_buffer: records in the shuffle buffer.
        skip_batches: elements already consumed (resume).
        cycle_length: files read in parallel.

    Example:
        >>> ds = token_dataset(open_channel("/data", "train"), sequence_length=1024, batch_shape=(1, 4, 8))
        >>> next(iter(ds)).shape
        TensorShape([1, 4, 8, 1025])
    """
    manifest = channel.manifest
    if sequence_length > manifest.sequence_length:
        raise DataError(
            f"sequence_length {sequence_length} is longer than the shards' {manifest.sequence_length}: "
            "preprocess again with a longer sequence, or train with a shorter one"
        )
    files, split_records = worker_files(channel.shards, channel.root, worker, workers)
    records_per_element = 1
    for size in batch_shape:
        records_per_element *= size

    ds = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    ds = ds.repeat()
    ds = ds.interleave(
        lambda f: tf.data.TFRecordDataset(f, buffer_size=1 << 20),
        cycle_length=min(cycle_length, len(files)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    if split_records:
        ds = ds.shard(workers, worker)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer, seed=seed + 1, reshuffle_each_iteration=True)
    ds = ds.batch(records_per_element, drop_remainder=True)
    if skip_batches:
        ds = ds.skip(skip_batches)  # before decoding: skipped batches are read but never decoded
    ds = ds.map(_decoder(manifest, sequence_length + 1), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    ds = ds.map(lambda tokens: tf.reshape(tokens, (*batch_shape, sequence_length + 1)))
    return ds.prefetch(tf.data.AUTOTUNE)
