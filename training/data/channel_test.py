import shutil

import numpy as np
import pytest
import tensorflow as tf

from conftest import SEQUENCE_LENGTH, write_dataset
from data import token_shards
from data.channel import DataError, SequenceStream, evaluation_dataset, open_channel, token_dataset
from data.sequence_order import ORDERS


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


@pytest.mark.parametrize("order", ORDERS)
def test_same_seed_same_order_and_a_start_resumes_the_stream(dataset_dir, order):
    channel = open_channel(dataset_dir, "train")

    def first(n, seed=5, start=0):
        ds = token_dataset(channel, sequence_length=8, batch_shape=(2,), order=order, seed=seed, start_sequence=start)
        return [b.numpy() for b in ds.take(n)]

    full = first(6)
    np.testing.assert_array_equal(np.stack(full), np.stack(first(6)))
    np.testing.assert_array_equal(np.stack(full[4:]), np.stack(first(2, start=8)))
    assert not np.array_equal(np.stack(full), np.stack(first(6, seed=6)))


def global_batches(channel, workers: int, start: int, steps: int, order: str, source_weights=None) -> np.ndarray:
    """[steps, 8 sequences, 9 tokens]: every worker's element of each step, workers in order."""
    per_worker = 8 // workers  # one replica per worker, micro-batches of 2, accumulation to 8 sequences
    datasets = [
        token_dataset(channel, sequence_length=8, batch_shape=(1, per_worker // 2, 2), worker=w, workers=workers,
                      order=order, seed=7, shuffle_buffer=16, start_sequence=start, source_weights=source_weights)
        for w in range(workers)
    ]  # fmt: skip
    steps_seen = zip(*(ds.take(steps) for ds in datasets), strict=True)
    return np.stack([np.concatenate([e.numpy().reshape(-1, 9) for e in step]) for step in steps_seen])


@pytest.mark.parametrize("order", ORDERS)
def test_the_global_batch_of_a_step_does_not_depend_on_the_number_of_workers(dataset_dir, order):
    channel = open_channel(dataset_dir, "train")
    uninterrupted = global_batches(channel, workers=2, start=0, steps=9, order=order)
    np.testing.assert_array_equal(global_batches(channel, workers=1, start=0, steps=9, order=order), uninterrupted)
    # Checkpointed after step 5 (position 5 x 8 sequences, mid-window), resumed on 1 worker (2 -> 1), on 2 (1 -> 2)
    # and on 4: each continues as the uninterrupted 2-worker run.
    for workers in (1, 2, 4):
        resumed = global_batches(channel, workers=workers, start=40, steps=4, order=order)
        np.testing.assert_array_equal(resumed, uninterrupted[5:])
    rows = {r.tobytes() for r in uninterrupted.reshape(-1, 9)}
    assert len(rows) > 60  # distinct sequences: workers did not read the same ones


@pytest.mark.parametrize("order", ORDERS)
def test_a_mix_reads_each_source_by_its_weight_and_resumes_and_resizes_as_one_stream(mixed_dataset_dir, order):
    channel = open_channel(mixed_dataset_dir, "train")  # two sources of 1,985 and 1,984 records
    weights = {"code": 0.9, "mail": 0.1}
    stream = SequenceStream(channel, take_tokens=9, local_batch=8, worker=0, workers=1, order=order, seed=7,
                            window=16, source_weights=weights)  # fmt: skip
    files, records = stream.order.locate(np.arange(3_000))
    source_of_file = [shard.source for shard in sorted(channel.shards, key=lambda shard: shard.file)]
    sources = [source_of_file[f] for f in files.tolist()]
    for start in range(0, 3_000, 1_000):  # each 1,000: 900 +- 2.815 of code (source_mix.window_bound)
        assert abs(sources[start : start + 1_000].count("code") - 900) <= 2.815
    read = list(zip(sources, files.tolist(), records.tolist(), strict=True))
    code, mail = [r for r in read if r[0] == "code"], [r for r in read if r[0] == "mail"]
    assert len(set(code)) == 1_985 < len(code) == 2_700  # the heavy source repeats: every record, then again
    assert len(set(mail)) == len(mail) == 300  # the light one is subsampled, no record twice
    uninterrupted = global_batches(channel, workers=2, start=0, steps=9, order=order, source_weights=weights)
    np.testing.assert_array_equal(uninterrupted.reshape(-1, 9), stream.read(np.arange(72)))
    for workers in (1, 2, 4):  # checkpointed after step 5, resumed on 1, 2 and 4 workers: the same stream
        resumed = global_batches(channel, workers=workers, start=40, steps=4, order=order, source_weights=weights)
        np.testing.assert_array_equal(resumed, uninterrupted[5:9])
    plain = global_batches(channel, workers=1, start=0, steps=9, order=order)
    assert not np.array_equal(plain, uninterrupted)


def test_a_mix_naming_sources_the_split_does_not_have_is_refused_in_one_line(dataset_dir, mixed_dataset_dir):
    mixed = open_channel(mixed_dataset_dir, "train")
    for weights, message in [
        ({"code": 1, "web": 1, "mail": 1}, "source_weights: web is no source of the train split"),
        ({"code": 1}, "source_weights: the train split's source mail has no weight"),
    ]:
        with pytest.raises(ValueError, match=message):
            token_dataset(mixed, sequence_length=8, batch_shape=(2,), source_weights=weights)
    with pytest.raises(ValueError, match="source_weights: the train split's shards name no source"):
        token_dataset(open_channel(dataset_dir, "train"), sequence_length=8, batch_shape=(2,), source_weights={"a": 1})


@pytest.mark.parametrize("order", ORDERS)
def test_a_resume_far_into_the_stream_reads_only_its_batch(dataset_dir, order):
    channel = open_channel(dataset_dir, "train")
    stream = SequenceStream(channel, take_tokens=9, local_batch=4, worker=1, workers=2, order=order, seed=7,
                            window=16)  # fmt: skip
    far = 10**12  # thousands of epochs in: nothing before it is read
    batch = next(stream.batches(far))
    assert stream.records_read <= 4 and batch.shape == (4, 9)
    np.testing.assert_array_equal(batch, stream.read(np.arange(far + 4, far + 8)))  # worker 1's half of 8


def test_a_corrupt_record_is_an_error(dataset_dir, tmp_path):
    copy = tmp_path / "tokens"
    shutil.copytree(dataset_dir, copy)
    channel = open_channel(copy, "train")
    path = copy / channel.shards[0].file
    data = bytearray(path.read_bytes())
    data[20] ^= 0xFF  # a token of record 0
    path.write_bytes(bytes(data))
    stream = SequenceStream(channel, take_tokens=9, local_batch=1, worker=0, workers=1, order="files")
    with pytest.raises(ValueError, match="corrupt record 0"):
        stream.read(np.arange(1))
    path.write_bytes(bytes(data[:-1]))
    with pytest.raises(DataError, match="does not hold"):
        SequenceStream(channel, take_tokens=9, local_batch=1, worker=0, workers=1, order="files")


def uneven_validation(dataset_dir, root, sizes: list[int]):
    """A copy of the dataset whose validation records are rewritten as files of ``sizes`` records, in order."""
    shutil.copytree(dataset_dir, root)
    manifest = token_shards.read_manifest(root)
    records = [r for s in manifest.split_shards("validation") for r in token_shards.read_tfrecords(root / s.file)]
    assert sum(sizes) <= len(records)
    manifest.shards = manifest.split_shards("train")
    for n, size in enumerate(sizes):
        relative = f"validation/uneven-{n}.tfrecord"
        with open(root / relative, "wb") as f:
            for record in records[sum(sizes[:n]) : sum(sizes[: n + 1])]:
                token_shards.TFRecordWriter(f).write(record)
        manifest.shards.append(
            token_shards.ShardInfo(relative, "validation", size, size * manifest.record_tokens,
                                   token_shards.sha256_of(root / relative))
        )  # fmt: skip
    for part in (root / token_shards.MANIFESTS_DIR).glob("*.json"):
        part.unlink()
    token_shards.write_manifest_part(root, "algo-1", manifest)
    channel = open_channel(root, "validation")
    file_of = {}
    for n, shard in enumerate(sorted(channel.shards, key=lambda s: s.file)):
        for record in token_shards.read_tfrecords(root / shard.file):
            file_of[np.frombuffer(record, "<u2").astype(np.int32).tobytes()] = n
    return channel, file_of


def sample_rows(channel, batches, batch_shape, workers=1):
    """Every row of an evaluation over ``workers`` workers: (tokens, weight), workers' slices in order."""
    datasets = [
        evaluation_dataset(channel, sequence_length=SEQUENCE_LENGTH, batch_shape=batch_shape, worker=w,
                           workers=workers, batches=batches)
        for w in range(workers)
    ]  # fmt: skip
    steps = zip(*datasets, strict=True)
    rows = np.concatenate([np.concatenate([e.numpy().reshape(-1, SEQUENCE_LENGTH + 2) for e in s]) for s in steps])
    return [(row[:-1].tobytes(), int(row[-1])) for row in rows]


def test_the_validation_sample_covers_every_file_in_proportion_to_its_size(dataset_dir, tmp_path):
    sizes = [4, 30, 12, 2, 16]  # 64 records in files of very different sizes
    channel, file_of = uneven_validation(dataset_dir, tmp_path / "uneven", sizes)
    rows = sample_rows(channel, batches=4, batch_shape=(2, 2))  # 16 sequences: a quarter of the split
    per_file = np.bincount([file_of[tokens] for tokens, _ in rows], minlength=len(sizes))
    share = 16 * np.array(sizes) / 64  # each file's share of the sample: 1, 7.5, 3, 0.5, 4
    assert (np.abs(per_file - share) <= 1).all(), f"sampled {per_file.tolist()} of files holding {sizes}"
    assert len(set(rows)) == 16 and all(weight == 1 for _, weight in rows)
    # the same sequences at every evaluation, and however many workers split the batches
    assert sample_rows(channel, batches=4, batch_shape=(2, 2)) == rows
    assert sample_rows(channel, batches=4, batch_shape=(1, 2), workers=2) == rows


def test_the_whole_split_is_every_sequence_once_and_fillers_weigh_nothing(dataset_dir, tmp_path):
    channel, file_of = uneven_validation(dataset_dir, tmp_path / "uneven", [5, 9, 7])  # 21 records
    rows = sample_rows(channel, batches=None, batch_shape=(2, 2), workers=2)  # 3 global batches of 8
    assert len(rows) == 24 and sorted(tokens for tokens, w in rows if w) == sorted(file_of)
    assert [w for _, w in rows] == [1] * 21 + [0] * 3


def test_a_sample_larger_than_the_split_is_every_sequence_once(dataset_dir, tmp_path):
    """Drawn from 21 sequences, a sample of 32 would count 11 of them twice and narrow the standard error: the
    evaluation reads each once instead, in as many batches as that takes."""
    channel, file_of = uneven_validation(dataset_dir, tmp_path / "uneven", [5, 9, 7])  # 21 records
    rows = sample_rows(channel, batches=8, batch_shape=(2, 2))  # 8 global batches of 4: 32 sequences asked for
    assert [w for _, w in rows] == [1] * 21 + [0] * 3  # 6 batches, the last filled with weight 0
    assert sorted(tokens for tokens, w in rows if w) == sorted(file_of)  # each of the 21 once
    assert sample_rows(channel, batches=8, batch_shape=(1, 2), workers=2) == rows  # the same over two workers
    assert channel.sequences == 21


def test_shorter_context_cuts_records_longer_is_refused(dataset_dir):
    channel = open_channel(dataset_dir, "train")
    batch = next(iter(token_dataset(channel, sequence_length=8, batch_shape=(2,), order="files")))
    first_record = np.frombuffer(token_shards.read_tfrecords(channel.root / channel.shards[0].file)[0], "<u2")
    np.testing.assert_array_equal(batch.numpy()[0], first_record[:9])
    with pytest.raises(DataError, match="longer than the shards"):
        token_dataset(channel, sequence_length=SEQUENCE_LENGTH + 1, batch_shape=(2,))


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
