"""Pipeline parallelism on this machine's CPU: parameter memory per device against the estimate, and step times.

1. Memory. For each preset and K = 2, 4, a PipelinedGPT on K logical CPU devices, its AdamW (built) and the
   pipeline trainer's gradient buffers; the bytes of every variable are added up by the device it lives on
   (``variable.device``) and set against the estimate's figure for that stage (``infra/estimate/stages.py``):
   parameters x (4 weights + 8 Adam moments + 4 gradient buffers) in float32. The estimate also counts the
   gradients themselves (4 bytes) and a 4-byte running sum when a step has several micro-batches: transient
   tensors, not variables, so not in the measured figure (reported separately). "extra bytes" are the
   variables the estimate does not model: dropout seed states (16 bytes per block), AdamW's step counter.
   TensorFlow's CPU logical devices share one allocator (``get_memory_info`` reports the same total for
   each), so "on a device" here means placed there, the placement a GPU run would allocate on that GPU.

2. Step times. The single-device ``Trainer`` and the pipeline with K = 1, 2, 4 train the same model on the
   same random batches (M micro-batches per step, one GPipe pass), median of the timed steps. Logical CPU
   devices share the same cores, so the stages cannot run at the same time: these numbers show the overhead
   of the schedule and the copies, not a speed-up (see ``pipeline_gpu.py`` for the GPU measurement).

    .venv/bin/python bench/pipeline_bench.py [--presets gpt3-125m gpt3-350m] [--steps 5]
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "training"))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from gpt.model import GPT  # noqa: E402
from gpt.pipeline.model import PipelinedGPT, stage_of  # noqa: E402
from run.engines import StrategyEngine  # noqa: E402
from run.pipeline_trainer import PipelineEngine, PipelineTrainer, build_pipeline_replicas, split_cpu  # noqa: E402
from run.trainer import Trainer, make_optimizer  # noqa: E402

from infra.estimate.memory import state_bytes_per_parameter  # noqa: E402
from infra.estimate.stages import stage_layers, stage_parameters  # noqa: E402
from infra.training_code import model_presets  # noqa: E402

MAX_STAGES = 4
# The variables of a stage in the estimate: float32 weights, Adam m and v, the persistent gradient buffers (16
# bytes); its transient gradients and running sum are tensors, not variables.
_STATE = state_bytes_per_parameter("fp32", "adamw", accumulate=False, pipeline=True)
FP32_STATE_BYTES = _STATE["weights"] + _STATE["optimizer"] + _STATE["gradient_buffers"]
MB = 2**20


def variable_bytes(variable) -> int:
    return int(np.prod(variable.shape)) * tf.as_dtype(variable.dtype).size


def pipelined_trainer(preset: str, vocab: int, context: int, stages: int, micro: int, microbatches: int):
    engine = PipelineEngine([[f"/CPU:{k}" for k in range(stages)]])

    def build(devices):
        return PipelinedGPT.from_preset(preset, vocab_size=vocab, sequence_length=context, devices=devices)

    models, optimizers = build_pipeline_replicas(engine, build, 1e-4)
    return PipelineTrainer(
        models,
        optimizers,
        engine,
        accumulation_steps=microbatches,
        microbatches=microbatches,
        micro_batch_size=micro,
        sequence_length=context,
    )


def memory_rows(preset: str, vocab: int, context: int) -> list[dict]:
    """Measured bytes per device (weights, AdamW state, gradient buffers) against the estimate, K = 2 and 4."""
    rows = []
    shape = model_presets()[preset]
    for stages in (2, 4):
        trainer = pipelined_trainer(preset, vocab, context, stages, micro=1, microbatches=1)
        model, devices = trainer.model, trainer.model.devices
        measured = [0] * stages
        for variable in [*model.variables, *trainer.optimizer.variables]:
            measured[stage_of(variable, devices)] += variable_bytes(variable)
        for buffer in trainer.buffers[0]:
            measured[stage_of(buffer, devices)] += variable_bytes(buffer)
        planned = stage_parameters(shape, vocab, context, stages)
        layers = stage_layers(shape, vocab, context, stages)
        assert [len(b) for b in model.stage_blocks] == layers  # training and the estimate split alike
        for k in range(stages):
            rows.append(
                {
                    "preset": preset,
                    "K": stages,
                    "stage": k,
                    "blocks": layers[k],
                    "parameters": planned[k],
                    "measured_mb": measured[k] / MB,
                    "extra_bytes": measured[k] - planned[k] * FP32_STATE_BYTES,
                    "planned_mb": planned[k] * FP32_STATE_BYTES / MB,
                    "accumulator_mb": planned[k] * 4 / MB,
                }
            )
        del trainer, model
        gc.collect()
    return rows


def timed_steps(trainer, batches: list[tf.Tensor], warmup: int = 2) -> float:
    """Median seconds per step after ``warmup`` steps (tracing, first allocations)."""
    times = []
    for i, batch in enumerate(batches):
        start = time.perf_counter()
        trainer.train_step(batch)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def step_rows(preset: str, vocab: int, context: int, micro: int, microbatches: int, steps: int) -> list[dict]:
    rng = np.random.default_rng(0)
    batches = [
        tf.constant(rng.integers(0, vocab, (1, microbatches, micro, context + 1)), tf.int32) for _ in range(steps + 2)
    ]
    tokens = microbatches * micro * context
    single = GPT.from_preset(preset, vocab_size=vocab, sequence_length=context)
    trainer = Trainer(
        single,
        make_optimizer(single, 1e-4),
        StrategyEngine(tf.distribute.get_strategy(), "default"),
        accumulation_steps=microbatches,
        micro_batch_size=micro,
        sequence_length=context,
    )
    seconds = timed_steps(trainer, batches)
    rows = [{"engine": "Trainer (one device)", "K": 1, "seconds": seconds, "tokens_per_s": tokens / seconds}]
    for stages in (1, 2, 4):
        trainer = pipelined_trainer(preset, vocab, context, stages, micro, microbatches)
        seconds = timed_steps(trainer, batches)
        bubble = (stages - 1) / (microbatches + stages - 1)
        rows.append(
            {"engine": "pipeline", "K": stages, "seconds": seconds, "tokens_per_s": tokens / seconds, "bubble": bubble}
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=["gpt3-125m", "gpt3-350m"])
    parser.add_argument("--vocab", type=int, default=50_257)
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--step-preset", default="small")
    parser.add_argument("--step-vocab", type=int, default=8192)
    parser.add_argument("--step-context", type=int, default=128)
    parser.add_argument("--micro", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    if split_cpu(MAX_STAGES) < MAX_STAGES:
        raise SystemExit(f"could not split the CPU into {MAX_STAGES} logical devices")
    print(f"TensorFlow {tf.__version__}, {os.cpu_count()} CPU cores, {MAX_STAGES} logical CPU devices\n")

    print("Parameter memory per device (weights + AdamW m, v + gradient buffers, float32), measured vs estimate")
    print(f"{'preset':<11}{'K':>3}{'stage':>7}{'blocks':>8}{'params M':>10}{'measured MB':>13}{'estimate MB':>12}"
          f"{'ratio':>7}{'extra bytes':>13}{'(+accum. MB)':>14}")  # fmt: skip
    for preset in args.presets:
        for r in memory_rows(preset, args.vocab, args.context):
            print(
                f"{r['preset']:<11}{r['K']:>3}{r['stage']:>7}{r['blocks']:>8}{r['parameters'] / 1e6:>10.1f}"
                f"{r['measured_mb']:>13.1f}{r['planned_mb']:>12.1f}{r['measured_mb'] / r['planned_mb']:>7.4f}"
                f"{r['extra_bytes']:>13}{r['accumulator_mb']:>14.1f}"
            )

    print(
        f"\nStep time, {args.step_preset} (vocab {args.step_vocab}, context {args.step_context}), "
        f"{args.microbatches} micro-batches of {args.micro}, median of {args.steps} steps after 2 warm-up"
    )
    print(f"{'engine':<22}{'K':>3}{'s/step':>9}{'tokens/s':>10}{'GPipe bubble (K-1)/(M+K-1)':>29}")
    for r in step_rows(args.step_preset, args.step_vocab, args.step_context, args.micro, args.microbatches, args.steps):
        bubble = f"{r['bubble']:.3f}" if "bubble" in r else "-"
        print(f"{r['engine']:<22}{r['K']:>3}{r['seconds']:>9.3f}{r['tokens_per_s']:>10.0f}{bubble:>29}")


if __name__ == "__main__":
    main()
