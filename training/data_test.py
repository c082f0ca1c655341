import numpy as np
import pytest
import tensorflow as tf
import token_shards
from data import DataError, open_channel, token_dataset, worker_files

from conftest import SEQUENCE_LENGTH, write_dataset


def records_as_arrays(channel) -> set[bytes]:
    rows = set()
    for shard in channel.shards:
        for record in token_shards.read_tfrecords(channel.root / shard.file):
            rows.add(np.frombuffer(record, "<u2").astype(np.int32).tobytes())
    return rows


def test_batches_have_the_step_shape_and_hold_real_records(dataset_dir):
    channel = open_channel(dataset_dir, "train")
    batch = next(iter(token_dataset(channel, sequence_length=SEQUENCE_LENGTH, batch_shape=(1, 2, 3))))
    assert batch.shape == (1, 2, 3, SEQUENCE_LENGTH + 1) and batch.dtype == tf.int32
    known = records_as_arrays(channel)
    assert all(row.tobytes() in known for row in batch.numpy().reshape(-1, SEQUENCE_LENGTH + 1))


def test_same_seed_same_order_and_skip_resumes_the_stream(dataset_dir):
    channel = open_channel(dataset_dir, "train")

    def first(n, seed=5, skip=0):
        ds = token_dataset(channel, sequence_length=8, batch_shape=(2,), seed=seed, skip_batches=skip)
        return [b.numpy() for b in ds.take(n)]

    full = first(6)
    np.testing.assert_array_equal(np.stack(full), np.stack(first(6)))
    np.testing.assert_array_equal(np.stack(full[4:]), np.stack(first(2, skip=4)))
    assert not np.array_equal(np.stack(full), np.stack(first(6, seed=6)))


def test_shorter_context_cuts_records_longer_is_refused(dataset_dir):
    channel = open_channel(dataset_dir, "train")
    batch = next(iter(token_dataset(channel, sequence_length=8, batch_shape=(2,), shuffle=False)))
    first_record = np.frombuffer(token_shards.read_tfrecords(channel.root / channel.shards[0].file)[0], "<u2")
    np.testing.assert_array_equal(batch.numpy()[0], first_record[:9])
    with pytest.raises(DataError, match="longer than the shards"):
        token_dataset(channel, sequence_length=SEQUENCE_LENGTH + 1, batch_shape=(2,))


def test_workers_read_disjoint_records(dataset_dir):
    channel = open_channel(dataset_dir, "train")

    def rows(worker, workers):
        ds = token_dataset(channel, sequence_length=8, batch_shape=(4,), worker=worker, workers=workers, shuffle=False)
        return {r.tobytes() for b in ds.take(3) for r in b.numpy()}

    assert not rows(0, 2) & rows(1, 2)
    files = [s.file for s in channel.shards]
    assert len(files) == 4
    second_worker = [str(channel.root / files[1]), str(channel.root / files[3])]
    assert worker_files(channel.shards, channel.root, 1, 2) == (second_worker, False)
    assert worker_files(channel.shards, channel.root, 2, 8)[1]  # fewer files than workers: split records
    assert not rows(0, 8) & rows(1, 8)


def test_channel_may_point_at_the_split_folder(dataset_dir):
    assert open_channel(dataset_dir / "validation", "validation").root == dataset_dir


def test_missing_and_empty_channels_are_clear_errors(tmp_path):
    with pytest.raises(DataError, match="no train channel"):
        open_channel(None, "train")
    with pytest.raises(DataError, match="does not exist"):
        open_channel(tmp_path / "nowhere", "train")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no manifest"):
        open_channel(tmp_path / "empty", "train")
    dataset = write_dataset(tmp_path / "d")
    manifest = token_shards.read_manifest(dataset)
    manifest.shards = [s for s in manifest.shards if s.split != "validation"]
    token_shards.write_manifest_part(dataset, "algo-1", manifest)
    with pytest.raises(DataError, match="no validation sequences"):
        open_channel(dataset, "validation")
