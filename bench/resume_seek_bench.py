"""Resume cost: time to the first batch of a run resumed far into its dataset, seeking against re-reading.

Writes a dataset of 2,049-token records (the shape of a 2,048-token context) in 8 shards, then, in this process:

- seek: ``data.token_dataset(start_sequence=...)`` (what train.py does), at the start and at 90% of the way in;
- skip: the TFRecord stream batched and ``ds.skip``-ed to the same place, the way the data position was restored
  before (every record consumed so far read again), the reference.

    .venv/bin/python bench/resume_seek_bench.py [--records 131072]

Exits 1 when the seek at 90% costs more than 10x the seek at the start (its cost must not grow with the position).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))

import numpy as np
import tensorflow as tf
from data import token_shards
from data.channel import open_channel, token_dataset
from data.sequence_order import ORDERS, make_order

RECORD_TOKENS = 2049
SHARDS = 8
BATCH = (1, 4, 8)  # one worker's step: 32 sequences


def write_dataset(root: Path, records: int) -> None:
    (root / "train").mkdir(parents=True)
    (root / token_shards.TOKENIZER_FILE).write_text("{}")  # never read: the bench decodes no text
    manifest = token_shards.Manifest(
        RECORD_TOKENS - 1, "uint16", 50257, 0, token_shards.sha256_of(root / "tokenizer.json")
    )
    rng = np.random.default_rng(0)
    for shard in range(SHARDS):
        relative, count = f"train/bench-{shard:05d}.tfrecord", records // SHARDS
        with open(root / relative, "wb") as f:
            writer = token_shards.TFRecordWriter(f)
            for _ in range(count // 256):
                for row in rng.integers(0, 50257, (256, RECORD_TOKENS), dtype=np.uint16):
                    writer.write(row.tobytes())
        manifest.shards.append(token_shards.ShardInfo(relative, "train", count, count * RECORD_TOKENS, ""))
    token_shards.write_manifest_part(root, "bench", manifest)


def seek(root: Path, start: int) -> float:
    began = time.perf_counter()
    ds = token_dataset(open_channel(root, "train"), sequence_length=RECORD_TOKENS - 1, batch_shape=BATCH,
                       seed=1, start_sequence=start)  # fmt: skip
    next(iter(ds))
    return time.perf_counter() - began


def skip(root: Path, start: int) -> float:
    """The previous pipeline, as it was: shuffled files, 8 interleaved readers, a shuffle buffer, batch, skip."""
    began = time.perf_counter()
    files = sorted(str(p) for p in (root / "train").glob("*.tfrecord"))
    ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files), seed=1).repeat()
    ds = ds.interleave(lambda f: tf.data.TFRecordDataset(f, buffer_size=1 << 20), cycle_length=8,
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)  # fmt: skip
    ds = ds.shuffle(1024, seed=2).batch(int(np.prod(BATCH)), drop_remainder=True).skip(start // int(np.prod(BATCH)))
    ds = ds.map(lambda r: tf.io.decode_raw(r, tf.uint16))
    next(iter(ds))
    return time.perf_counter() - began


def pile_scale_seek(order: str) -> float:
    """Seconds to place one batch 95% into a 300 B-token run's order (146.8 M records in 560 shards), no reads."""
    began = time.perf_counter()
    order = make_order([262_144] * 560, order, seed=1, window=1024)
    order.locate(np.arange(int(0.95 * order.records), int(0.95 * order.records) + 512))
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=131072, help="records in the dataset (4 KiB each)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "tokens"
        write_dataset(root, args.records)
        far = int(args.records * 0.9)
        tokens = far * RECORD_TOKENS
        seek(root, 0)  # warm the page cache and TensorFlow alike for both
        at_start, at_far, skipped = seek(root, 0), seek(root, far), skip(root, far)
    million = args.records * RECORD_TOKENS / 1e6
    print(f"dataset {args.records:,} records x {RECORD_TOKENS} tokens ({million:,.0f} M tokens), page-cached")
    print(f"first batch, seek at sequence 0:          {at_start * 1e3:8.1f} ms")
    print(f"first batch, seek at sequence {far:,}:  {at_far * 1e3:8.1f} ms")
    print(f"first batch, skip to sequence {far:,}:  {skipped * 1e3:8.1f} ms ({tokens / skipped / 1e6:.1f} M tokens/s)")
    print(f"skip / seek at the same position: {skipped / at_far:.0f}x")
    for order in ORDERS:
        print(
            f"seek 95% into a 300 B-token dataset's {order} order (indices only): {pile_scale_seek(order) * 1e3:.0f} ms"
        )
    return 0 if at_far <= 10 * at_start else 1


if __name__ == "__main__":
    sys.exit(main())
