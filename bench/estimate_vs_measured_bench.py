"""The estimate against reality: peak memory and step time of real training steps on this CPU.

Each case trains the project's GPT (``training/gpt``) with the project's trainer (``training/run/trainer.py``:
AdamW, gradient accumulation, clipping) or, for K > 1, the pipeline trainer on K logical CPU devices
(``training/run/pipeline_trainer.py``: one GPipe pass of all the step's micro-batches; the stages share the
process's memory, so the estimate's figure is theirs together: ``shared_pool_bytes``) for a few steps in a fresh
process, and measures:

- peak memory: the peak of the bytes in use in TensorFlow's BFC allocator, the one a GPU uses
  (``TF_CPU_ALLOCATOR_USE_BFC``, ``tf.config.experimental.get_memory_info``), over those in use after a warm-up
  step of an unrelated model: the tensors. Until issue 37 it was the growth of the peak resident set
  (``VmHWM``), which counted what the C library's malloc kept in its per-thread arenas (the recomputed case
  200-300 MiB above its tensors) and, on the BFC pool, its growth by regions (120-260 MiB); it is still
  printed (``resident_bytes``), not checked (docs/benchmarks.md, "The recomputed case"). The pool is given one
  region first (``reserve_one_region``), as TensorFlow reserves a GPU's memory; grown region by region, as the CPU
  pool otherwise is, it handed the tiny cases' 392.6 MiB logits 512 MiB each. The estimate's figure
  compared with it is its model of tensors plus the 5% allocator allowance (the CUDA context and TensorFlow's reserve
  come off a GPU's memory instead: ``infra/estimate/hardware.py``).
- Operations run one at a time (inter-op parallelism 1), as a GPU stream runs them. With TensorFlow's
  default the trainer's accumulation loop starts the next micro-batch before the last one's backward pass
  ends, so two micro-batches were in flight; the loop now runs one at a time (``ONE_MICRO_BATCH_IN_FLIGHT``),
  and the case with TensorFlow's default inter-op parallelism is reported, not checked.
- step time: CPU seconds (the machine is shared; CPU time is what contention disturbs least), median of
  the steps after the first two (tracing). The estimate's step time needs the device's peak FLOP/s and a
  utilisation; the peak is measured in the same process as the best CPU-second rate of a 2048 x 2048
  float32 matmul, and the utilisation at which the estimate matches each case is reported. The check is
  that one utilisation fits every case (the FLOP count scales right), not its value.

    .venv/bin/python bench/estimate_vs_measured_bench.py

Exits 1 when a memory estimate is off by more than 10%.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "training")]

from infra.estimate import compute  # noqa: E402  (after the path set-up)
from infra.estimate.memory import Memory, allocator_slack, stage_memories  # noqa: E402
from infra.training_code import model_presets  # noqa: E402

MEMORY_TOLERANCE = 0.10
# The attention core of training/gpt/layers.py the memory model counts: "lean", the custom-gradient core that keeps
# only the compute-dtype probabilities (issue 37); "naive" (float32 scores and softmax) before it.
ATTENTION = "lean"
# Whether the accumulation loop runs one micro-batch at a time: since issue 37 it is a tf.while_loop with
# parallel_iterations=1 (before, TensorFlow's default 10 started the next micro-batch's forward pass before the
# last one's backward pass ended, once the loop had two iterations or more).
ONE_MICRO_BATCH_IN_FLIGHT = True
STEPS = 6
POOL_BYTES = 8 * 2**30  # the one region of the pool (``reserve_one_region``): over twice any case's peak
CASES = [  # preset, vocabulary, sequence, micro-batch, micro-batches per step, precision, recompute, serial ops,
    # pipeline stages (1: the data-parallel Trainer; K > 1: PipelineTrainer on K logical CPU devices, one pass)
    ("tiny", 50_257, 256, 8, 1, "fp32", False, True, 1),
    ("tiny", 50_257, 256, 8, 2, "fp32", False, True, 1),
    ("tiny", 50_257, 256, 8, 2, "fp32", False, False, 1),
    ("small", 8_192, 512, 8, 1, "fp32", False, True, 1),
    ("small", 8_192, 512, 8, 1, "fp32", True, True, 1),
    ("small", 8_192, 512, 8, 1, "bf16", False, True, 1),
    ("small", 50_257, 256, 8, 1, "fp32", False, True, 1),
    ("small", 8_192, 512, 8, 4, "fp32", False, True, 1),
    ("small", 8_192, 512, 4, 4, "fp32", False, True, 2),
]


def checked(case) -> bool:
    """Whether a case's memory is held to ``MEMORY_TOLERANCE``: serial operations, and no overlapping loop
    iterations unless the loop runs one micro-batch at a time."""
    serial, accumulation, stages = case[7], case[4], case[8]
    return serial and (ONE_MICRO_BATCH_IN_FLIGHT or accumulation <= 2 or stages > 1)  # a pipeline: one GPipe pass


def status_kib(field: str) -> int:
    """A field of /proc/self/status, in KiB (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reserve_one_region(tf, nbytes: int = POOL_BYTES) -> None:
    """Gives TensorFlow's BFC pool one region of ``nbytes``, unwritten, and frees it at once, so that later tensors
    are split from it as on a GPU, where TensorFlow reserves the device's memory as one region.

    The CPU pool always grows region by region (``allow_growth``), each a power of two: a 392.6 MiB tensor then
    gets a 512 MiB region of its own and all of it (BFC splits a chunk only at twice the request or 128 MiB to
    spare), 119.4 MiB the GPU would not spend.
    """
    # [MiB, 2^20]: a shape is int32, one of 2^33 elements would overflow it. Eager: freed as the result is dropped.
    tf.raw_ops.Empty(shape=[nbytes // 2**20, 2**20], dtype=tf.uint8, init=False)


def child(case: list) -> dict:
    """Runs in a fresh process: trains one case and returns what it measured."""
    preset, vocab, seq, micro, accumulation, precision, recompute, serial, stages = case
    import tensorflow as tf
    from gpt.model import GPT
    from gpt.pipeline.model import PipelinedGPT
    from run.engines import StrategyEngine
    from run.pipeline_trainer import PipelineEngine, PipelineTrainer, build_pipeline_replicas, split_cpu
    from run.trainer import PRECISIONS, Trainer, make_optimizer

    if stages > 1:
        split_cpu(stages)
    tf.config.threading.set_intra_op_parallelism_threads(os.cpu_count() or 1)
    if serial:
        tf.config.threading.set_inter_op_parallelism_threads(1)
    engine = StrategyEngine(tf.distribute.get_strategy(), "default")

    def build(name, vocab_size, micro_batch, steps, k=1):
        if k == 1:
            model = GPT.from_preset(
                name, vocab_size=vocab_size, sequence_length=seq, dtype=PRECISIONS[precision], recompute=recompute
            )
            trainer = Trainer(
                model,
                make_optimizer(model, 1e-4),
                engine,
                accumulation_steps=steps,
                micro_batch_size=micro_batch,
                sequence_length=seq,
                precision=precision,
            )
        else:
            pipeline = PipelineEngine([[f"/CPU:{i}" for i in range(k)]])
            models, optimizers = build_pipeline_replicas(
                pipeline,
                lambda devices: PipelinedGPT.from_preset(
                    name, vocab_size=vocab_size, sequence_length=seq, devices=devices
                ),
                1e-4,
            )
            trainer = PipelineTrainer(
                models,
                optimizers,
                pipeline,
                accumulation_steps=steps,
                microbatches=steps,
                micro_batch_size=micro_batch,
                sequence_length=seq,
            )
        batch = tf.random.uniform(trainer.batch_shape, maxval=vocab_size, dtype=tf.int32, seed=1)
        return trainer, batch

    warm, warm_batch = build("tiny", 257, 1, 1)  # the runtime's own memory goes into the baseline
    warm.train_step(warm_batch)
    del warm, warm_batch
    reserve_one_region(tf)
    baseline_kib = status_kib("VmRSS")
    baseline_tensors = tf.config.experimental.get_memory_info("CPU:0")["current"]
    tf.config.experimental.reset_memory_stats("CPU:0")

    a = tf.random.uniform([2048, 2048])
    tf.matmul(a, a).numpy()
    rates = []
    for _ in range(5):
        start = time.process_time()
        tf.matmul(a, a).numpy()
        rates.append(2 * 2048**3 / (time.process_time() - start))

    trainer, batch = build(preset, vocab, micro, accumulation, stages)
    times = []
    for _ in range(STEPS):
        start = time.process_time()
        trainer.train_step(batch)
        times.append(time.process_time() - start)
    return {
        "peak_bytes": tf.config.experimental.get_memory_info("CPU:0")["peak"] - baseline_tensors,
        "resident_bytes": (status_kib("VmHWM") - baseline_kib) * 1024,
        "step_seconds": statistics.median(times[2:]),
        "peak_flops": max(rates),
    }


def shared_pool_bytes(memories: list[Memory]) -> int:
    """The stages' memory in one pool (K logical CPU devices): every stage's standing part (model state, saved
    inputs, kept activations) and the largest of their transient parts (a stage's logits or one layer's backward
    working set, the larger), with the 5% slack. The stages' backward cells ran one after the other in every run
    measured (docs/benchmarks.md: the sum of the stages' totals, all transients at once, read 0.88-0.91); each
    GPU has its own memory, where the plan checks each stage's total. One stage: its total."""
    transient = [memory.transient for memory in memories]
    tensors = sum(memory.modeled for memory in memories) - sum(transient) + max(transient)
    return tensors + allocator_slack(tensors)


def estimate(case: list) -> tuple[int, int, int]:
    """The estimate's (memory bytes, model FLOPs per token, executed FLOPs per token), for the attention the training
    code has (``ATTENTION``)."""
    preset, vocab, seq, micro, accumulation, precision, recompute, _, stages = case
    shape = model_presets()[preset]
    memories = stage_memories(
        shape,
        vocab_size=vocab,
        sequence_length=seq,
        micro_batch=micro,
        precision=precision,
        optimizer="adamw",
        recompute=recompute,
        model_parallel_degree=stages,
        accumulation_steps=accumulation,
        pipeline_microbatches=accumulation if stages > 1 else 1,
        attention=ATTENTION,
        xla=False,  # the bench's steps run without XLA (train.py's CPU default)
    )
    n = shape.parameters(vocab, seq)
    return (
        shared_pool_bytes(memories),
        compute.model_flops_per_token(shape, n, seq),
        compute.hardware_flops_per_token(shape, n, seq, recompute, pipelined=stages > 1),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0

    print(f"{os.cpu_count()} CPUs; each case in a fresh process, {STEPS} steps, median of the last {STEPS - 2}")
    rows = []
    for case in CASES:
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_CPU_ALLOCATOR_USE_BFC": "true"}  # a GPU's allocator
        out = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(case)], capture_output=True, text=True, env=env, check=True
        )
        measured = json.loads(out.stdout.strip().splitlines()[-1])
        planned, _, executed = estimate(case)
        tokens = case[2] * case[3] * case[4]  # sequence x micro-batch x micro-batches
        # The utilisation at which the estimate's step time equals the measured one, on the measured peak.
        mfu = tokens * executed / (measured["peak_flops"] * measured["step_seconds"])
        rows.append((case, planned, measured, tokens * executed, mfu))
        print(f"  measured {case}: {measured}", file=sys.stderr)

    mean_mfu = statistics.mean(row[-1] for row in rows if checked(row[0]))
    header = (
        f"{'case':<42}{'estimate MiB':>12}{'measured MiB':>13}{'ratio':>7}"
        f"{'CPU s':>9}{'estimate s':>11}{'ratio':>7}{'fitted MFU':>12}"
    )
    print(header + "\n" + "-" * len(header))
    worst = 0.0
    for case, planned, measured, flops, mfu in rows:
        preset, vocab, seq, micro, accumulation, precision, recompute, serial, stages = case
        name = f"{preset} V={vocab} s={seq} b={micro}x{accumulation} {precision}{' recompute' if recompute else ''}"
        name += f" pp {stages}" if stages > 1 else ""
        name += "" if serial else " (TF default ops)"
        name += "" if serial and checked(case) else " (overlapping iterations)" if serial else ""
        ratio = measured["peak_bytes"] / planned
        worst = max(worst, abs(ratio - 1) if checked(case) else 0)
        step = flops / (measured["peak_flops"] * mean_mfu)  # work over the fitted throughput
        print(
            f"{name:<42}{planned / 2**20:>12,.0f}{measured['peak_bytes'] / 2**20:>13,.0f}{ratio:>7.2f}"
            f"{measured['step_seconds']:>9.3f}{step:>11.3f}{measured['step_seconds'] / step:>7.2f}{mfu:>12.1%}"
        )
    peaks = [row[2]["peak_flops"] for row in rows]
    print(
        f"\nmatmul peak (best 2048^3 float32 matmul per process): {min(peaks) / 1e9:,.0f}-{max(peaks) / 1e9:,.0f} "
        f"GFLOP per CPU-second; estimated step time at the mean fitted utilisation {mean_mfu:.1%}"
    )
    print(f"worst memory error {worst:.0%} of the serial cases (limit {MEMORY_TOLERANCE:.0%})")
    return 0 if worst <= MEMORY_TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
