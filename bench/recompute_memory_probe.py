"""Peak memory of one training step for a GPT shape, two ways: the process's resident high-water mark
(as ``estimate_vs_measured_bench.py`` reads it) and the tensors' peak in TensorFlow's BFC allocator, the one
a GPU uses (``TF_CPU_ALLOCATOR_USE_BFC=true``, ``tf.config.experimental.get_memory_info``).

Issue 37's recomputed case read 15-18% above the estimate in the bench; this probe splits the peak into
what tensors hold and what the C library's allocator keeps (docs/benchmarks.md, "The recomputed case").

    .venv/bin/python bench/recompute_memory_probe.py --layers 8 --micro-batch 8 --vocab 1024 --recompute full
    .venv/bin/python bench/recompute_memory_probe.py ... --bfc   # the BFC allocator's tensor peak
    .venv/bin/python bench/recompute_memory_probe.py ... --bfc --grappler-off dependency_optimization
    .venv/bin/python bench/recompute_memory_probe.py ... --profile build/recompute-profile  # the live tensors
        # at the BFC peak, from the profiler's allocation events

One configuration per process (fresh allocator); operations one at a time (inter-op parallelism 1).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "training")]

from estimate_vs_measured_bench import reserve_one_region, status_kib  # noqa: E402  (this folder is the script's: on the path)

MIB = 2**20
NO_OP = "(no tf_op: an XLA-compiled call's output)"


def _value(stat, stat_names: dict):
    """An XStat's value: a string, a number, or a reference to a string (how op names are stored)."""
    if stat.HasField("ref_value"):
        return stat_names.get(stat.ref_value)
    return stat.str_value or stat.int64_value or stat.uint64_value


def live_at_peak(logdir: str, smallest: int = MIB // 2) -> list[str]:
    """The allocations alive at the allocator's peak in a profile: (event, MiB, op) lines, oldest first."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(sorted(glob.glob(f"{logdir}/plugins/profile/*/*.xplane.pb"))[-1]).read_bytes())
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    names = {k: v.name for k, v in plane.event_metadata.items()}
    stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
    events = []
    for line in plane.lines:
        for event in line.events:
            kind = names.get(event.metadata_id)
            if kind in ("MemoryAllocation", "MemoryDeallocation"):
                stats = {stat_names.get(s.metadata_id): _value(s, stat_names) for s in event.stats}
                events.append((event.offset_ps, kind, stats))
    events.sort(key=lambda e: e[0])
    live, peak, at_peak = {}, 0, {}
    for i, (_, kind, stats) in enumerate(events):
        if kind == "MemoryAllocation":
            live[stats.get("addr")] = (i, stats.get("requested_bytes") or 0, stats.get("tf_op") or NO_OP)
        else:
            live.pop(stats.get("addr"), None)
        if (stats.get("bytes_allocated") or 0) > peak:
            peak, at_peak = stats["bytes_allocated"], dict(live)
    rows = [f"peak in use {peak / MIB:.1f} MiB; live allocations of {smallest / MIB} MiB or more:"]
    rows += [f"{i:6} {size / MIB:7.2f} {op}" for i, size, op in sorted(at_peak.values()) if size >= smallest]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--sequence-length", type=int, default=512)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--recompute", default="full")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--bfc", action="store_true", help="the BFC allocator's tensor peak (set before TF starts)")
    parser.add_argument("--grappler-off", nargs="*", default=[], help="grappler optimizers to turn off")
    parser.add_argument("--profile", help="a log folder: profile one micro-step, print the tensors live at the peak")
    args = parser.parse_args()
    if args.bfc or args.profile:
        os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    import tensorflow as tf
    from gpt.model import GPT
    from run.engines import StrategyEngine
    from run.trainer import PRECISIONS, Trainer, make_optimizer

    tf.config.threading.set_inter_op_parallelism_threads(1)
    if args.grappler_off:
        tf.config.optimizer.set_experimental_options(dict.fromkeys(args.grappler_off, False))
    engine = StrategyEngine(tf.distribute.get_strategy(), "default")

    def build(n_layer, d_model, n_head, vocab, micro_batch, recompute):
        model = GPT(
            vocab_size=vocab,
            sequence_length=args.sequence_length,
            n_layer=n_layer,
            d_model=d_model,
            n_head=n_head,
            dtype=PRECISIONS[args.precision],
            recompute=recompute,
        )
        trainer = Trainer(
            model,
            make_optimizer(model, 1e-4),
            engine,
            accumulation_steps=1,
            micro_batch_size=micro_batch,
            sequence_length=args.sequence_length,
            precision=args.precision,
        )
        return trainer, tf.random.uniform(trainer.batch_shape, maxval=vocab, dtype=tf.int32, seed=1)

    warm, warm_batch = build(2, 64, 2, 257, 1, "none")  # the runtime's own memory goes into the baseline
    warm.train_step(warm_batch)
    del warm, warm_batch
    if args.bfc or args.profile:
        reserve_one_region(tf)
    baseline_kib = status_kib("VmRSS")
    trainer, batch = build(args.layers, args.d_model, args.heads, args.vocab, args.micro_batch, args.recompute)
    trainer.train_step(batch)
    result = {"config": vars(args)}
    if args.bfc or args.profile:
        result["resident_tensors_mib"] = tf.config.experimental.get_memory_info("CPU:0")["current"] / MIB
        tf.config.experimental.reset_memory_stats("CPU:0")
    if args.profile:
        trainer._micro_grads(batch[0, 0])  # traced outside the profile
        tf.profiler.experimental.start(args.profile)
        trainer._micro_grads(batch[0, 0])[0].numpy()
        tf.profiler.experimental.stop()
        print("\n".join(live_at_peak(args.profile)))
    for _ in range(args.steps - 1):
        trainer.train_step(batch)
    result["resident_peak_growth_mib"] = (status_kib("VmHWM") - baseline_kib) * 1024 / MIB
    if args.bfc or args.profile:
        result["tensor_peak_mib"] = tf.config.experimental.get_memory_info("CPU:0")["peak"] / MIB
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
