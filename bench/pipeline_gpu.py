"""Pipeline throughput and bubble on GPUs: K = 1, 2, 4 stages with M micro-batches per GPipe pass.

Prepared for a machine with at least 4 GPUs; not run in this repository's CI (it has none). For every K in
``--stages`` and M in ``--microbatches``, one pipeline replica on GPU:0 .. GPU:K-1, bf16:

- step: median seconds of a full ``PipelineTrainer.train_step`` (M micro-batches, AdamW), and tokens/s;
- compute: median seconds of the step's forward/backward part alone (``trainer._compute_fn``: the GPipe pass,
  the norm and the clipping), which is where the bubble is;
- t_k: median seconds of stage k's forward + backward of one micro-batch run alone on its GPU;
- measured bubble = 1 - mean_k(M x t_k) / compute: the idle fraction of the average device during the pass
  (it also absorbs the copies between GPUs, which the formula leaves out);
- GPipe's formula (K - 1) / (M + K - 1), exact for equal stages and free copies; with unequal stages the
  slowest stage sets the pace, so ``imbalance`` = max_k t_k / mean_k t_k is printed too.

One JSON line per configuration. With a single GPU, ``--logical`` splits it into K logical GPUs: placement
and schedule run, but the stages share one chip, so neither the throughput nor the bubble is a pipeline's.
``--device-kind CPU`` runs the same on logical CPU devices (a smoke test of this script).

    python bench/pipeline_gpu.py --preset gpt3-350m --context 1024 --micro 4 --stages 1 2 4 \\
        --microbatches 1 2 4 8 16 --steps 10
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))

import numpy as np
import tensorflow as tf
from gpt.pipeline.model import PipelinedGPT
from run.pipeline_trainer import PipelineEngine, PipelineTrainer, build_pipeline_replicas


def configure_devices(kind: str, needed: int, logical: bool, memory_mb: int) -> int:
    """Splits one GPU (or the CPU) into ``needed`` logical devices when asked; returns the devices available."""
    physical = tf.config.list_physical_devices(kind)
    if not physical:
        raise SystemExit(f"no {kind} here")
    if kind == "CPU" or logical:
        config = tf.config.LogicalDeviceConfiguration(memory_limit=memory_mb if kind == "GPU" else None)
        tf.config.set_logical_device_configuration(physical[0], [config] * needed)
    return len(tf.config.list_logical_devices(kind))


def median_seconds(fn, repeats: int, warmup: int = 2) -> float:
    """Median wall time of ``fn()`` (which must block until its device work is done) after ``warmup`` calls."""
    times = []
    for i in range(warmup + repeats):
        start = time.perf_counter()
        fn()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def stage_seconds(model: PipelinedGPT, stage: int, tokens: tf.Tensor, repeats: int) -> float:
    """Stage ``stage``'s forward + backward of one micro-batch, alone on its device (inputs made there)."""
    last = model.num_stages - 1
    micro, length = tokens.shape[0], tokens.shape[1] - 1

    @tf.function
    def cell():
        with tf.device(model.devices[stage]):
            if stage == 0:
                x = tokens[:, :-1]
            else:
                x = tf.random.normal([micro, length, model.d_model], dtype=model.compute_dtype)
            with tf.GradientTape() as tape:
                if stage > 0:
                    tape.watch(x)
                y = model.stage_call(stage, x, training=True)
                if stage == last:
                    y = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(tokens[:, 1:], y))
            sources = model.stage_inputs(stage) + ([x] if stage > 0 else [])
            upstream = None if stage == last else tf.ones_like(y)
            grads = tape.gradient(y, sources, output_gradients=upstream)
            return tf.add_n([tf.reduce_sum(tf.cast(tf.convert_to_tensor(g), tf.float32)) for g in grads])

    return median_seconds(lambda: float(cell()), repeats)


def measure(args, kind: str, stages: int, microbatches: int) -> dict:
    engine = PipelineEngine([[f"/{kind}:{k}" for k in range(stages)]])

    def build(devices):
        return PipelinedGPT.from_preset(
            args.preset,
            vocab_size=args.vocab,
            sequence_length=args.context,
            devices=devices,
            recompute=args.recompute,
            dtype="mixed_bfloat16",
        )

    models, optimizers = build_pipeline_replicas(engine, build, 1e-4)
    trainer = PipelineTrainer(
        models,
        optimizers,
        engine,
        accumulation_steps=microbatches,
        microbatches=microbatches,
        micro_batch_size=args.micro,
        sequence_length=args.context,
        precision="bf16",
    )
    rng = np.random.default_rng(0)
    batch = tf.constant(rng.integers(0, args.vocab, (1, microbatches, args.micro, args.context + 1)), tf.int32)
    step = median_seconds(lambda: trainer.train_step(batch).wait(), args.steps)
    forward_backward = tf.function(trainer._compute_fn)
    compute = median_seconds(lambda: float(forward_backward(batch)[0]), args.steps)
    per_stage = [stage_seconds(trainer.model, k, batch[0, 0], args.steps) for k in range(stages)]
    busy = microbatches * statistics.mean(per_stage)
    tokens = microbatches * args.micro * args.context
    return {
        "preset": args.preset,
        "K": stages,
        "M": microbatches,
        "blocks": [len(b) for b in trainer.model.stage_blocks],
        "step_s": round(step, 4),
        "tokens_per_s": round(tokens / step, 1),
        "compute_s": round(compute, 4),
        "stage_s": [round(t, 5) for t in per_stage],
        "imbalance": round(max(per_stage) / statistics.mean(per_stage), 3),
        "bubble_measured": round(1 - busy / compute, 3),
        "bubble_gpipe": round((stages - 1) / (microbatches + stages - 1), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="gpt3-350m")
    parser.add_argument("--vocab", type=int, default=50_257)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--micro", type=int, default=4)
    parser.add_argument("--stages", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--microbatches", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--recompute", action="store_true")
    parser.add_argument("--device-kind", choices=["GPU", "CPU"], default="GPU")
    parser.add_argument("--logical", action="store_true", help="split one GPU into max(--stages) logical GPUs")
    parser.add_argument("--logical-memory-mb", type=int, default=30_000)
    args = parser.parse_args()
    available = configure_devices(args.device_kind, max(args.stages), args.logical, args.logical_memory_mb)
    print(json.dumps({"tensorflow": tf.__version__, "devices": available, "kind": args.device_kind}), flush=True)
    for stages in args.stages:
        if stages > available:
            print(json.dumps({"K": stages, "skipped": f"{available} {args.device_kind} devices"}), flush=True)
            continue
        for microbatches in args.microbatches:
            print(json.dumps(measure(args, args.device_kind, stages, microbatches)), flush=True)
            tf.keras.backend.clear_session()


if __name__ == "__main__":
    main()
