"""How long a pipeline takes to start: graph size, trace time and time to the first step against micro-batches.

A PipelinedGPT of ``--layers`` narrow blocks on ``--stages`` logical CPU devices, trained by ``PipelineTrainer``
with M micro-batches per GPipe pass (one pass per step). For each M:

    ops          nodes of the training step's graph, function bodies (loop bodies) included
    trace s      tracing the step's ``compute`` tf.function (Python building the graph)
    first step s the first ``train_step`` after tracing: graph optimisation, placement and one step's run
    next step s  the second ``train_step``: the step's run alone
    start-up s   trace + first step - next step: what the pipeline costs before training runs at speed

Trace time follows the op count, so a narrow width (d = 64) measures what a wide model's start-up would be.
Fresh process per M (``--one M`` runs one), so one M's graphs do not slow another's.

    .venv/bin/python bench/pipeline_trace_bench.py [--microbatches 1 4 32] [--layers 40] [--stages 8]
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "training"))


def graph_ops(graph) -> int:
    """Nodes of a tf.function's graph and of every function in its library (loop and branch bodies)."""
    graph_def = graph.as_graph_def()
    return len(graph_def.node) + sum(len(f.node_def) for f in graph_def.library.function)


def measure(microbatches: int, layers: int, stages: int, width: int) -> dict:
    import numpy as np
    import tensorflow as tf
    from gpt.pipeline.model import PipelinedGPT
    from run.pipeline_trainer import PipelineEngine, PipelineTrainer, build_pipeline_replicas, split_cpu

    if split_cpu(stages) < stages:
        raise SystemExit(f"could not split the CPU into {stages} logical devices")
    vocab, context, micro = 256, 16, 1
    engine = PipelineEngine([[f"/CPU:{k}" for k in range(stages)]])

    def build(devices):
        return PipelinedGPT(vocab, context, layers, width, 2, devices=devices)

    models, optimizers = build_pipeline_replicas(engine, build, 1e-4)
    trainer = PipelineTrainer(
        models, optimizers, engine, accumulation_steps=microbatches, microbatches=microbatches,
        micro_batch_size=micro, sequence_length=context,
    )  # fmt: skip
    batch = tf.constant(np.random.default_rng(0).integers(0, vocab, (1, microbatches, micro, context + 1)), tf.int32)
    start = time.perf_counter()
    graph = trainer._step.get_concrete_function(batch).graph
    traced = time.perf_counter() - start
    start = time.perf_counter()
    result = trainer.train_step(batch).wait()
    first = time.perf_counter() - start
    start = time.perf_counter()
    trainer.train_step(batch).wait()
    after = time.perf_counter() - start
    return {"M": microbatches, "ops": graph_ops(graph), "trace_s": traced, "first_step_s": first,
            "next_step_s": after, "loss": float(result.loss)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--microbatches", type=int, nargs="+", default=[1, 4, 32])
    parser.add_argument("--layers", type=int, default=40)
    parser.add_argument("--stages", type=int, default=8)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.layers, args.stages, args.width)))
        return
    print(f"{args.layers} layers (d = {args.width}) in {args.stages} stages on logical CPU devices, one pass per step")
    print(f"{'M':>4}{'ops':>10}{'trace s':>10}{'first step s':>14}{'next step s':>13}{'start-up s':>12}{'vs M=1':>8}")
    base = None
    for m in args.microbatches:
        command = [sys.executable, __file__, "--one", str(m), "--layers", str(args.layers),
                   "--stages", str(args.stages), "--width", str(args.width)]  # fmt: skip
        row = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        startup = row["trace_s"] + row["first_step_s"] - row["next_step_s"]
        base = base or startup
        print(
            f"{m:>4}{row['ops']:>10,}{row['trace_s']:>10.1f}{row['first_step_s']:>14.1f}{row['next_step_s']:>13.1f}"
            f"{startup:>12.1f}{startup / base:>8.2f}"
        )


if __name__ == "__main__":
    main()
