"""What the data order costs in quality: validation loss on the whole split after the same training, per order.

``make run``'s training (the ``small`` preset, context 128, 4,096-token steps, 250 steps, seed 1234, its corpus of
24 MB in 4 files preprocessed as its input says: vocabulary 4,096, 2% of documents for validation), and the same on
a 4x larger sample corpus (96 MB in 16 files), each with ``--data_order blocks`` (64-record blocks permuted, then
windows of 1,024 shuffled: the order before this bench) and ``permutation`` (a full random permutation of each
epoch). One ``train.py`` process per run (one worker with 2 micro-batches of 16 takes the sequences two workers of
16 would: the order does not depend on the worker count). Printed per run: the ``[valid_split]`` figure (mean token
loss over every validation sequence, its standard error over the sequences), the input wait of the ``[health]``
lines (median and largest window) and the run's wall time; and what each order reads: ``pread`` calls per worker and
step (make run's 2 workers of 16 sequences; consecutive records are one read) and their mean size here and with
2,049-token records.

    flock /tmp/heavy.lock .venv/bin/python bench/data_order_bench.py [--steps 250] [--work DIR]

CPU-heavy: about 3 minutes a run on a 2-core machine, 4 runs, plus 1 minute of preprocessing.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAINING = ROOT / "training"
sys.path[:0] = [str(ROOT), str(TRAINING)]

import numpy as np  # noqa: E402 (the repository root and training/ on the path first)
from data.channel import SequenceStream, open_channel  # noqa: E402
from data.token_shards import FRAMING_BYTES  # noqa: E402

from local.corpus import write_corpus  # noqa: E402

CORPORA = {"make run's corpus (24 MB)": (24, 4), "4x larger (96 MB)": (96, 16)}  # MB of text, files
ORDERS = ("blocks", "permutation")
PREPROCESS = ["--vocab_size", "4096", "--sample_bytes", "6M", "--sequence_length", "128", "--shard_size_mb", "4",
              "--validation_fraction", "0.02", "--host", "algo-1", "--progress_seconds", "600"]  # fmt: skip
TRAIN = ["--model_preset", "small", "--sequence_length", "128", "--global_batch_tokens", "4096",
         "--micro_batch_size", "16", "--seed", "1234", "--eval_batches", "8", "--log_every", "10",
         "--sample_tokens", "0", "--checkpoint_every", "0", "--cpu_threads", "2"]  # fmt: skip
SPLIT_LINE = re.compile(
    r"^\[valid_split\] step=\d+ val_loss=(\S+) val_loss_se=(\S+) val_ppl=(\S+) sequences=(\d+)", re.M
)


def run(argv: list[str], **env: str) -> str:
    done = subprocess.run([sys.executable, *argv], cwd=TRAINING, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    if done.returncode:
        raise RuntimeError(done.stdout[-3000:])
    return done.stdout


def dataset(work: Path, megabytes: int, files: int) -> Path:
    """The corpus written and preprocessed as ``make run`` does, on one host; returns the dataset folder."""
    raw, tokens = work / "raw", work / "tokens"
    write_corpus(raw, megabytes, files)
    run(["preprocess.py", "tokenizer", "--input_dir", str(raw), "--output_dir", str(work / "tokenizer"), *PREPROCESS])
    run(["preprocess.py", "shards", "--input_dir", str(raw), "--tokenizer_dir", str(work / "tokenizer"),
         "--output_dir", str(tokens), *PREPROCESS])  # fmt: skip
    return tokens


def train(tokens: Path, order: str, steps: int, work: Path) -> dict:
    started = time.perf_counter()
    output = run(
        ["train.py", *TRAIN, "--max_steps", str(steps), "--eval_every", str(steps), "--data_order", order,
         "--train_dir", str(tokens), "--checkpoint_dir", str(work / f"checkpoints-{order}")],
        SM_MODEL_DIR=str(work / f"model-{order}"), SM_OUTPUT_DIR=str(work / f"output-{order}"),
    )  # fmt: skip
    loss, error, perplexity, sequences = SPLIT_LINE.search(output).groups()
    waits = [float(x) for x in re.findall(r"^\[health\] step=\d+ input_wait_pct=(\S+)", output, re.M)]
    seconds = time.perf_counter() - started
    return {"loss": float(loss), "se": float(error), "ppl": float(perplexity), "sequences": int(sequences),
            "wait_median": statistics.median(waits), "wait_max": max(waits), "seconds": seconds}  # fmt: skip


def reads(tokens: Path, order: str, steps: int, workers: int = 2, local_batch: int = 16) -> tuple[float, float]:
    """(``pread`` calls per worker and step, records per call) of ``steps`` steps of make run's 2 workers."""
    stream = SequenceStream(open_channel(tokens, "train"), take_tokens=129, local_batch=local_batch, worker=0,
                            workers=workers, order=order, seed=1234, window=1024)  # fmt: skip
    calls = 0
    for start in range(0, steps * workers * local_batch, local_batch):
        files, records = stream.order.locate(np.arange(start, start + local_batch))
        keys = np.sort(files * 2**40 + records)
        calls += 1 + np.count_nonzero(np.diff(keys) != 1)  # a run of consecutive records of one file: one read
    return calls / (steps * workers), steps * workers * local_batch / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=250, help="steps of every run (make run: 250)")
    parser.add_argument("--work", type=Path, default=None, help="folder for corpora, datasets and runs (else a temp)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        work = args.work or Path(temporary)
        for name, (megabytes, files) in CORPORA.items():
            folder = work / f"{megabytes}mb"
            tokens = dataset(folder, megabytes, files)
            results = {order: train(tokens, order, args.steps, folder) for order in ORDERS}
            print(f"{name}, {args.steps} steps, whole validation split ({results['permutation']['sequences']:,} seq.)")
            for order, r in results.items():
                print(f"  {order:12s} val_loss {r['loss']:.4f} ± {r['se']:.4f}  ppl {r['ppl']:8.2f}  input wait "
                      f"{r['wait_median']:.2f}% median, {r['wait_max']:.2f}% max  {r['seconds']:.0f} s")  # fmt: skip
            for order in ORDERS:
                calls, per_call = reads(tokens, order, args.steps)
                print(f"  {order:12s} {calls:.1f} reads per worker and step of 16 sequences, {per_call:.2f} records "
                      f"a read: {per_call * (2 * 129 + FRAMING_BYTES):,.0f} bytes here, "
                      f"{per_call * (2 * 2049 + FRAMING_BYTES):,.0f} at 2,048 tokens")  # fmt: skip
            gap = results["blocks"]["loss"] - results["permutation"]["loss"]
            print(f"  blocks - permutation: {gap:+.4f} = {gap / results['permutation']['se']:+.1f} standard errors\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
