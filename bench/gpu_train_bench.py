"""GPU training throughput, MFU and peak memory of gpt3-125m / 350m / 1.3b, against the estimate's figures.

For each preset, context 2048, GPT-2 vocabulary, bf16: the largest micro-batch (16, 8, 4, 2, 1) that the
estimate (``infra/estimate``) says fits one GPU without recomputation, else the largest that fits with it;
each with XLA off, then on. Each case runs in a fresh process (clean memory statistics) through the
project's trainer (AdamW, clipping, one micro-batch per step): median wall time of the steps after two
warm-up steps (tracing, XLA compilation), training tokens/s, MFU = tokens/s x model FLOPs per token
(6·N + 12·L·s·d) / the device's bf16 peak, and TensorFlow's peak GPU allocation against the estimate's
memory figure and its step time at its default MFU. One table; cases not started within ``--budget``
seconds are listed as skipped, so it ends within ten minutes on one H200 (989 TFLOPS bf16, 141 GB).

    python bench/gpu_train_bench.py                    # on a machine with a GPU
    .venv/bin/python bench/gpu_train_bench.py --smoke  # the same path on this CPU at a toy size

Exits 1 when a case fails (out of memory included) or the estimate's memory figure is off by more than 25%
(GPU runs only); exits 2 before any case when the machine has a GPU (nvidia-smi) that this Python's TensorFlow
cannot use, naming the fix. The stock TensorFlow 2.21 training image (SageMaker's DLC, the training jobs'
image) has what it needs; this workplace's lent H200 does not: its image holds PyTorch and JAX, no TensorFlow,
and nothing larger than 64 MiB can be carried to it (the GPU build of TensorFlow is several hundred MB, plus
its CUDA 12 libraries), so there it stops at that check.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "training")]

from infra.estimate import compute  # noqa: E402
from infra.estimate.hardware import usable_bytes  # noqa: E402
from infra.estimate.memory import GIB, device_memory  # noqa: E402
from infra.estimate.step_time import AFTER, step_time  # noqa: E402
from infra.instances import INSTANCE_TYPES  # noqa: E402  (after the path set-up)
from infra.training_code import model_presets  # noqa: E402

DEVICE = INSTANCE_TYPES["ml.p5e.48xlarge"]  # one H200 of it
MEMORY_TOLERANCE = 0.25
GPU_SIZES = {"presets": ["gpt3-125m", "gpt3-350m", "gpt3-1.3b"], "context": 2048, "vocab": 50257, "steps": 8}
SMOKE_SIZES = {"presets": ["tiny"], "context": 128, "vocab": 512, "steps": 3}
# The TensorFlow this project pins (requirements-dev.txt's tensorflow-cpu), the training image's version too.
TENSORFLOW_VERSION = re.search(r"^tensorflow-cpu==([^\s;]+)", (ROOT / "requirements-dev.txt").read_text(), re.M)[1]


def planned_memory(preset: str, vocab: int, context: int, micro: int, recompute: bool) -> int:
    shape = model_presets()[preset]
    kinds = {"precision": "bf16", "optimizer": "adamw", "model_parallel_degree": 1, "accumulation_steps": 1}
    return device_memory(
        shape, vocab_size=vocab, sequence_length=context, micro_batch=micro, recompute=recompute, **kinds
    ).total


def choose(preset: str, vocab: int, context: int) -> tuple[int, bool]:
    """(micro-batch, recompute): the largest micro-batch the estimate fits without recomputation, else with it."""
    capacity = usable_bytes(DEVICE)
    for recompute in (False, True):
        for micro in (16, 8, 4, 2, 1):
            if planned_memory(preset, vocab, context, micro, recompute) <= capacity:
                return micro, recompute
    return 1, True


def tensorflow_gpu_problem(python: str = sys.executable) -> str | None:
    """Why ``python``'s TensorFlow cannot train on a GPU here (a sentence naming the fix), or None when it can."""
    probe = subprocess.run(
        [python, "-c", "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))"],
        capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )  # fmt: skip
    fix = f"install tensorflow[and-cuda]=={TENSORFLOW_VERSION} for {python}, or run in the TensorFlow training image"
    if probe.returncode:
        return f"{python} cannot import TensorFlow ({(probe.stderr.strip().splitlines() or ['?'])[-1]}): {fix}"
    if int(probe.stdout.split()[-1]) == 0:
        return f"TensorFlow in {python} sees no GPU (a CPU-only build, or CUDA libraries it cannot load): {fix}"
    return None


def child(case: dict) -> dict:
    """In a fresh process: trains one case and returns step seconds and the peak device allocation."""
    import tensorflow as tf
    from gpt.model import GPT
    from run.engines import StrategyEngine
    from run.trainer import Trainer, make_optimizer

    gpu = bool(tf.config.list_physical_devices("GPU"))
    model = GPT.from_preset(case["preset"], vocab_size=case["vocab"], sequence_length=case["context"],
                            dtype="mixed_bfloat16", recompute=case["recompute"])  # fmt: skip
    engine = StrategyEngine(tf.distribute.get_strategy(), "default")
    trainer = Trainer(model, make_optimizer(model, 1e-4), engine, accumulation_steps=1, micro_batch_size=case["micro"],
                      sequence_length=case["context"], precision="bf16", use_xla=case["xla"])  # fmt: skip
    batch = tf.random.uniform(trainer.batch_shape, maxval=case["vocab"], dtype=tf.int32, seed=1)
    times = []
    for _ in range(2 + case["steps"]):
        start = time.perf_counter()
        trainer.train_step(batch).wait()  # the step has finished on the device
        times.append(time.perf_counter() - start)
    peak = tf.config.experimental.get_memory_info("GPU:0")["peak"] if gpu else 0
    return {"step_seconds": statistics.median(times[2:]), "peak_bytes": peak, "gpu": gpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="toy size (the default without nvidia-smi)")
    parser.add_argument("--budget", type=float, default=540, help="seconds after which no case starts")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    sizes = SMOKE_SIZES if args.smoke or not shutil.which("nvidia-smi") else GPU_SIZES
    if sizes is GPU_SIZES and (problem := tensorflow_gpu_problem()):
        print(problem, file=sys.stderr)
        return 2
    cases = []
    for xla in (False, True):  # XLA off for every preset first: those rows come even if time runs out
        for preset in sizes["presets"]:
            micro, recompute = choose(preset, sizes["vocab"], sizes["context"])
            cases.append({"preset": preset, "vocab": sizes["vocab"], "context": sizes["context"], "micro": micro,
                          "recompute": recompute, "xla": xla, "steps": sizes["steps"]})  # fmt: skip

    started, failed, worst = time.perf_counter(), 0, 0.0
    peak_flops = DEVICE.peak_flops("bf16")
    header = (f"{'preset':<11}{'micro':>6}{'recomp':>7}{'XLA':>5}{'step s':>9}{'plan s':>8}{'tokens/s':>11}"
              f"{'MFU':>7}{'peak GiB':>10}{'plan GiB':>10}{'ratio':>7}")  # fmt: skip
    print(
        f"{DEVICE.gpu_model} ({DEVICE.peak_tflops_16bit:.0f} TFLOPS bf16, {DEVICE.device_memory_gib} GB); context "
        f"{sizes['context']}, vocab {sizes['vocab']}, bf16, AdamW; plan s: "
        "the modelled step time (infra/estimate/step_time.py)"
    )
    print(header + "\n" + "-" * len(header))
    for case in cases:
        name = f"{case['preset']:<11}{case['micro']:>6}{'yes' if case['recompute'] else 'no':>7}"
        name += f"{'on' if case['xla'] else 'off':>5}"
        left = args.budget - (time.perf_counter() - started)
        if left <= 0:
            print(f"{name}  skipped (budget of {args.budget:.0f} s spent)")
            continue
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
        try:
            out = subprocess.run([sys.executable, __file__, "--child", json.dumps(case)], capture_output=True,
                                 text=True, env=env, timeout=left)  # fmt: skip
        except subprocess.TimeoutExpired:
            print(f"{name}  stopped at the budget of {args.budget:.0f} s")
            continue
        if out.returncode:
            print(f"{name}  failed: {(out.stderr.strip().splitlines() or ['?'])[-1][:90]}")
            failed += 1
            continue
        measured = json.loads(out.stdout.strip().splitlines()[-1])
        shape = model_presets()[case["preset"]]
        n = shape.parameters(case["vocab"], case["context"])
        tokens = case["micro"] * case["context"]
        planned_s = step_time(
            shape, parameters=n, stage_parameters=n, vocab_size=case["vocab"], sequence_length=case["context"],
            micro_batch=case["micro"], precision="bf16", recompute=case["recompute"], instance=DEVICE,
            instance_count=1, model_parallel_degree=1, accumulation_steps=1, pipeline_microbatches=1,
            implementation=dataclasses.replace(AFTER, xla=case["xla"]),
        ).total  # one GPU: no all-reduce  # fmt: skip
        rate = tokens / measured["step_seconds"]
        mfu = rate * compute.model_flops_per_token(shape, n, case["context"]) / peak_flops
        planned = planned_memory(case["preset"], case["vocab"], case["context"], case["micro"], case["recompute"])
        ratio = measured["peak_bytes"] / planned
        if measured["gpu"]:
            worst = max(worst, abs(ratio - 1))
        print(f"{name}{measured['step_seconds']:>9.3f}{planned_s:>8.3f}{rate:>11,.0f}{mfu:>7.1%}"
              f"{measured['peak_bytes'] / GIB:>10.1f}{planned / GIB:>10.1f}{ratio:>7.2f}")  # fmt: skip
    print(f"{time.perf_counter() - started:.0f} s; MFU against the GPU's peak (on a CPU the figures are a smoke test)")
    return 0 if not failed and worst <= MEMORY_TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
