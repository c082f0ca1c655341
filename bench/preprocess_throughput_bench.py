"""Preprocessing throughput: end-to-end tokens per second per core against a bare ``tokenizers`` loop.

Both run pinned to one core, on the same documents: the reference loads the tokenizer and encodes them with
``encode_batch_fast`` (what the pipeline calls), so that the difference is what the pipeline adds per byte; the
pipeline runs ``preprocess.py shards`` (``--workers 1``): reading .jsonl.zst, JSON parsing, encoding, packing,
TFRecord writing and checksums. The tokenizer runs on one thread in both (RAYON_NUM_THREADS,
TOKENIZERS_PARALLELISM). Each measurement runs in a fresh process, as a SageMaker job does, and counts that
process's CPU seconds for the work alone (not its start-up): one process that loads tokenizer after tokenizer
grows by about 4 MB and slows by a few percent with each (0.47 s to 0.73 s for the same 2 MB after 20 loads),
which the job, with one tokenizer per process, never does. The two run back to back in alternating rounds
(``rounds.py``) and the overhead is taken from the median round's ratio. ``encode_batch`` is timed once, for
information. A second pipeline run with a process pool measures what the main process (reading, packing,
writing) costs per GB, which caps one instance's throughput. From the measured rate it sizes a Pile run.

    .venv/bin/python bench/preprocess_throughput_bench.py [--mb 8] [--rounds 16] [--vocab_size 50257]

Exits 1 when reading, packing and writing (everything but tokenization) cost more than 10% on top of it.
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one core for the reference, as in each pipeline worker
os.environ["RAYON_NUM_THREADS"] = "1"

import argparse
import concurrent.futures
import itertools
import json
import math
import multiprocessing
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pile.bpe import encoder_from_json, train_bpe
from pile.encode import CHUNK_BYTES
from pile.sample_corpus import stdlib_documents, write_pile
from pile.shards_job import ShardsConfig, run_shards
from preprocess import available_cores
from rounds import alternate, one_core, rate_ratio

MAX_OVERHEAD = 0.10
PILE_BYTES = 825 * 2**30
PILE_FILES = 30
DEADLINE_HOURS = 6.0
# (instance, vCPUs, USD per hour): SageMaker on-demand prices in us-east-1 estimated as 1.2 x the EC2 list price,
# NOT confirmed against the SageMaker pricing page; check before you budget.
INSTANCES = [("ml.c5.4xlarge", 16, 0.816), ("ml.c5.9xlarge", 36, 1.836), ("ml.c5.18xlarge", 72, 3.672),
             ("ml.m5.24xlarge", 96, 5.53)]  # fmt: skip


def batches(texts: list[str], batch_bytes: int = CHUNK_BYTES) -> list[list[str]]:
    out, batch, size = [], [], 0
    for text in texts:
        batch.append(text)
        size += len(text)
        if size >= batch_bytes:
            out.append(batch)
            batch, size = [], 0
    return [*out, batch] if batch else out


def reference(tokenizer_json: str, texts: list[str], method: str) -> tuple[float, int]:
    """CPU seconds and tokens of a bare encode loop, loading the tokenizer included (as the pipeline does)."""
    grouped = batches(texts)
    started, tokens = time.process_time(), 0
    encode = getattr(encoder_from_json(tokenizer_json), method)
    for batch in grouped:
        tokens += sum(len(e.ids) for e in encode(batch, add_special_tokens=False))
    return time.process_time() - started, tokens


def in_fresh_process(function, *args):
    """``function(*args)`` in a new process (spawned, so nothing of this one carries over), its result."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context, max_tasks_per_child=1) as process:
        return process.submit(function, *args).result()


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pipeline(work: Path, tokenizer: Path, name: str, workers: int) -> dict:
    """One shards run; CPU seconds of this process and of its pool processes, wall seconds, document tokens."""
    config = ShardsConfig(input_dir=work / "raw", tokenizer=tokenizer, output_dir=work / name, host="bench",
                          sequence_length=2048, shard_size_mb=256, validation_fraction=0.0005, workers=workers,
                          progress_seconds=3600)  # fmt: skip
    cpu, child, wall = time.process_time(), children_cpu(), time.perf_counter()
    manifest = run_shards(config)
    return {
        "main_cpu": time.process_time() - cpu,
        "pool_cpu": children_cpu() - child,
        "wall": time.perf_counter() - wall,
        "tokens": manifest.tokens() - manifest.documents_written,  # less the end-of-text ids, as the reference
    }


def pile_plan(bytes_per_cpu_second: float, main_bytes_per_second: float) -> list[dict]:
    """For each instance type: the fewest instances that finish The Pile within the deadline, and the cost."""
    plans = []
    file_bytes = PILE_BYTES / PILE_FILES
    for instance, vcpus, price in INSTANCES:
        host_rate = min((vcpus - 1) * bytes_per_cpu_second, main_bytes_per_second)  # one vCPU for the main process
        for count in range(1, PILE_FILES + 1):
            hours = math.ceil(PILE_FILES / count) * file_bytes / host_rate / 3600  # ShardedByS3Key: whole files
            if hours <= DEADLINE_HOURS:
                usd = round(count * hours * price)
                plans.append({"instance": instance, "count": count, "hours": round(hours, 2), "usd": usd,
                              "host_MBps": round(host_rate / 1e6, 1)})  # fmt: skip
                break
    return plans


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=8.0, help="text each round processes, MB")
    parser.add_argument("--tokenizer_mb", type=float, default=6.0, help="text the tokenizer is trained on, MB")
    parser.add_argument("--rounds", type=int, default=16, help="alternating rounds of reference and pipeline")
    parser.add_argument("--vocab_size", type=int, default=50257)
    parser.add_argument("--pool_workers", type=int, default=available_cores())
    args = parser.parse_args()
    texts = stdlib_documents(int(args.mb * 1e6))
    tokenizer_texts = stdlib_documents(int(args.tokenizer_mb * 1e6))
    text_bytes = sum(len(t.encode()) for t in texts)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        for part in range(4):
            write_pile(work / "raw" / f"{part:02d}.jsonl.zst", texts[part::4])
        started = time.perf_counter()
        tokenizer_json = train_bpe(tokenizer_texts, args.vocab_size).to_str()
        vocab = len(json.loads(tokenizer_json)["model"]["vocab"])
        print(
            f"corpus: {len(texts):,} documents, {text_bytes / 1e6:.1f} MB of stdlib Python sources; tokenizer "
            f"trained in {time.perf_counter() - started:.0f} s on {args.tokenizer_mb:.0f} MB: {vocab:,} tokens"
        )
        (work / "tokenizer.json").write_text(tokenizer_json)
        references, serial, names = [], [], itertools.count()

        def pipeline_rate() -> float:
            name = f"serial{next(names)}"
            serial.append(in_fresh_process(pipeline, work, work / "tokenizer.json", name, 1))
            shutil.rmtree(work / name)
            return serial[-1]["tokens"] / serial[-1]["main_cpu"]

        def reference_rate() -> float:
            references.append(in_fresh_process(reference, tokenizer_json, texts, "encode_batch_fast"))
            return references[-1][1] / references[-1][0]

        with one_core() as placement:
            ratio = rate_ratio(*alternate(args.rounds, pipeline_rate, reference_rate))
            batch_cpu, _ = in_fresh_process(reference, tokenizer_json, texts, "encode_batch")
        pool = pipeline(work, work / "tokenizer.json", "pool", workers=args.pool_workers)
    tokens = references[0][1]
    assert {r["tokens"] for r in serial} | {t for _, t in references} == {tokens}  # the same work on both sides
    fast_cpu = statistics.median(cpu for cpu, _ in references)
    pipeline_cpu = statistics.median(r["main_cpu"] for r in serial)
    overhead = 1 / ratio.median - 1  # the median round's: reference rate / pipeline rate - 1
    bytes_per_cpu_second = text_bytes / pipeline_cpu
    main_bytes_per_second = text_bytes / pool["main_cpu"]
    rows = [
        ("reference encode_batch_fast", tokens / fast_cpu, fast_cpu),
        ("reference encode_batch", tokens / batch_cpu, batch_cpu),
        ("pipeline, 1 process", tokens / pipeline_cpu, pipeline_cpu),
    ]
    print(f"{placement}, medians of {args.rounds} rounds:")
    print(f"{'':32}{'tokens/s/core':>15}{'CPU s':>8}")
    for label, rate, cpu in rows:
        print(f"{label:32}{rate:>15,.0f}{cpu:>8.2f}")
    print(f"overhead per round: {', '.join(f'{1 / r - 1:+.1%}' for r in ratio.per_round)}")
    print(f"pipeline / encode_batch_fast tokens per CPU-s: {ratio}")
    print(f"pipeline overhead on encode_batch_fast (median round): {overhead:+.1%} (limit {MAX_OVERHEAD:.0%}); "
          f"on encode_batch: {pipeline_cpu / batch_cpu - 1:+.1%}")  # fmt: skip
    print(f"{text_bytes / tokens:.2f} bytes/token; {bytes_per_cpu_second / 1e6:.2f} MB/s per core end to end")
    print(f"pool of {args.pool_workers}: {tokens / pool['wall']:,.0f} tokens/s wall; main process "
          f"{pool['main_cpu']:.2f} CPU s ({main_bytes_per_second / 1e6:.0f} MB/s ceiling per instance), "
          f"pool {pool['pool_cpu']:.2f} CPU s")  # fmt: skip
    print(f"The Pile ({PILE_BYTES / 2**30:.0f} GiB in {PILE_FILES} files) within {DEADLINE_HOURS:.0f} h of processing "
          "(download and start-up not included; prices unconfirmed, see INSTANCES):")  # fmt: skip
    for plan in pile_plan(bytes_per_cpu_second, main_bytes_per_second):
        print(f"  {plan['count']:>2} x {plan['instance']:<15} {plan['hours']:>5.2f} h  ~${plan['usd']:,.0f}  "
              f"({plan['host_MBps']} MB/s each)")  # fmt: skip
    return 0 if overhead <= MAX_OVERHEAD else 1


if __name__ == "__main__":
    sys.exit(main())
