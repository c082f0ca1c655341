import hashlib

import numpy as np
from data.token_shards import read_tfrecords

from pile.packing import SplitWriter, sequences_per_shard


def test_sequences_per_shard():
    assert sequences_per_shard(1024, 2049, "uint16") == (1 << 30) // (2049 * 2 + 16)
    assert sequences_per_shard(1024, 2049, "uint32") == (1 << 30) // (2049 * 4 + 16)
    assert sequences_per_shard(0.0001, 2049, "uint16") == 1


def test_packs_fixed_records_rotates_shards_and_pads_the_end(tmp_path):
    renamed = []
    writer = SplitWriter(tmp_path, "train", "h-in", record_tokens=5, dtype="uint16", records_per_shard=2, eot_id=7,
                         on_shard=lambda info: renamed.append(info.file))  # fmt: skip
    stream = np.arange(1, 24, dtype=np.uint16)  # 23 tokens: 4 full records and 3 tokens over
    for piece in np.split(stream, [3, 4, 11, 20]):
        writer.add(piece)
    assert sorted(p.name for p in (tmp_path / "train").iterdir()) == [
        "h-in-00000.tfrecord", "h-in-00001.tfrecord"
    ]  # fmt: skip
    shards = writer.finish()
    assert [s.file for s in shards] == renamed == [f"train/h-in-{n:05d}.tfrecord" for n in range(3)]
    records = [r for s in shards for r in read_tfrecords(tmp_path / s.file)]
    tokens = np.frombuffer(b"".join(records), dtype="<u2")
    assert tokens.tolist() == [*range(1, 24), 7, 7]
    assert [(s.sequences, s.tokens, s.padding_tokens) for s in shards] == [(2, 10, 0), (2, 10, 0), (1, 3, 2)]
    for s in shards:
        assert s.split == "train"
        assert s.sha256 == hashlib.sha256((tmp_path / s.file).read_bytes()).hexdigest()
    assert not list(tmp_path.rglob("*.tmp"))


def test_padding_record_that_fills_a_shard_is_counted(tmp_path):
    writer = SplitWriter(tmp_path, "validation", "p", record_tokens=4, dtype="uint32", records_per_shard=2, eot_id=0)
    writer.add(np.array([1, 2, 3, 4, 5], dtype=np.uint32))
    (shard,) = writer.finish()
    assert (shard.sequences, shard.tokens, shard.padding_tokens) == (2, 5, 3)
    assert len(read_tfrecords(tmp_path / shard.file)[1]) == 16


def test_incomplete_shard_stays_under_its_temporary_name(tmp_path):
    writer = SplitWriter(tmp_path, "train", "p", record_tokens=2, dtype="uint16", records_per_shard=10, eot_id=0)
    writer.add(np.arange(6, dtype=np.uint16))
    assert [p.name for p in (tmp_path / "train").iterdir()] == ["p-00000.tfrecord.tmp"]
    assert writer.shards == []


def test_empty_split_writes_nothing(tmp_path):
    writer = SplitWriter(tmp_path, "validation", "p", record_tokens=2, dtype="uint16", records_per_shard=1, eot_id=0)
    writer.add(np.zeros(0, dtype=np.uint16))
    assert writer.finish() == []
    assert not (tmp_path / "validation").exists()
