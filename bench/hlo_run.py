"""Runs an HLO micro-step from ``bench/hlo_export.py`` on jaxlib's XLA, without TensorFlow: step time, MFU, memory.

The HLO (TensorFlow's ``hlo_serialized``, gzipped) is converted to StableHLO by jaxlib and compiled by jax's
backend client for its first device (the GPU where there is one; ``hlo_compile.py``). Its inputs are made on that
device from the JSON's shapes: the tokens uniform over the vocabulary, the dropout stream 0, LayerNorm gains 1,
biases 0, other weights normal with standard deviation 0.02, the loss scale 1; or, with ``--values``, the exported
ones. Each step is one
execution on the same inputs, waited for; the step time is the median of ``--steps`` after ``--warmup``. MFU is the
model's FLOPs per token (6N + 12·L·T·d, ``training/contract/presets.py``) x tokens per second / the peak given by
``--peak-tflops``: the step time is measured, the peak is the device's datasheet figure, not measured. XLA's own
count of the FLOPs the step executes (recompute included) is printed beside it. Memory: the compiler's peak for the
program (``hlo_compile.memory_figures``: arguments + results + temporaries) against ``infra/estimate/memory.py``'s
figure for it (the JSON's ``memory_estimate_bytes``), and where the device reports it, the most its allocator held.

    .venv-jax/bin/python bench/hlo_run.py build/hlo/gpt3-1.3b-bf16-b4-s2048.json --peak-tflops 989
    .venv-jax/bin/python bench/hlo_run.py build/hlo/tiny-bf16-b2-s128.json --values  # TF's inputs and loss

Prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from hlo_compile import compile_hlo, memory_figures

jax.config.update("jax_enable_x64", True)  # keep every exported dtype as it is
GIB = 2**30


def make_inputs(meta: dict, device: jax.Device, seed: int) -> list[jax.Array]:
    """Each of the step's inputs, made on ``device`` from its shape and dtype (module docstring)."""
    keys = jax.random.split(jax.random.key(seed), len(meta["inputs"]))
    arrays = []
    with jax.default_device(device):
        for spec, key in zip(meta["inputs"], keys, strict=True):
            shape, dtype, name = tuple(spec["shape"]), jnp.dtype(spec["dtype"]), spec["name"]
            if name == "tokens":
                value = jax.random.randint(key, shape, 0, meta["vocab_size"], dtype)
            elif name == "stream":  # replica 0's dropout stream
                value = jnp.zeros(shape, dtype)
            elif name.endswith(("gamma", "loss_scale")):
                value = jnp.ones(shape, dtype)
            elif name.endswith(("beta", "bias")):
                value = jnp.zeros(shape, dtype)
            else:
                value = 0.02 * jax.random.normal(key, shape, dtype)
            arrays.append(value)
    return arrays


def exported_inputs(meta: dict, path: Path, device: jax.Device) -> list[jax.Array]:
    """The values ``hlo_export.py --values`` wrote, checked against the JSON's shapes and dtypes."""
    with np.load(path) as saved:
        values = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    for spec, value in zip(meta["inputs"], values, strict=True):
        if list(value.shape) != spec["shape"] or value.dtype.name != spec["dtype"]:
            raise SystemExit(f"{path}: {spec['name']} is {value.dtype}{list(value.shape)}, the JSON says {spec}")
    return [jax.device_put(v, device) for v in values]


def run(meta_path: Path, *, steps: int, warmup: int, peak_tflops: float | None, values: bool, seed: int) -> dict:
    """Compiles and runs the step; its loss, step time, tokens/s and MFU."""
    meta = json.loads(meta_path.read_text())
    device = jax.devices()[0]
    start = time.perf_counter()
    executable = compile_hlo(gzip.decompress(meta_path.with_suffix(".hlo.pb.gz").read_bytes()), device)
    compile_seconds = time.perf_counter() - start
    inputs = exported_inputs(meta, meta_path.with_suffix(".npz"), device) if values else make_inputs(meta, device, seed)
    times, outputs = [], []
    for _ in range(warmup + steps):
        start = time.perf_counter()
        outputs = jax.block_until_ready(executable.execute(inputs))
        times.append(time.perf_counter() - start)
    grad_norm = float(jnp.sqrt(sum(jnp.sum(jnp.square(g.astype(jnp.float64))) for g in outputs[1:])))
    allocator = (device.memory_stats() or {}).get("peak_bytes_in_use")  # None on a CPU
    step = statistics.median(times[warmup:])
    tokens_per_second = meta["tokens_per_step"] / step
    cost = executable.cost_analysis()
    result = {
        "preset": meta["preset"], "micro_batch": meta["micro_batch"], "sequence_length": meta["sequence_length"],
        "device": device.device_kind, "jax": jax.__version__, "loss": float(outputs[0]),
        "grad_norm": grad_norm, "compile_s": round(compile_seconds, 2),
        "measured_step_ms": round(step * 1e3, 3), "measured_tokens_per_s": round(tokens_per_second, 1),
        "xla_flops_per_step": (cost or {}).get("flops"), "model_flops_per_token": meta["model_flops_per_token"],
    }  # fmt: skip
    result |= memory_result(memory_figures(executable), meta.get("memory_estimate_bytes"), allocator)
    if values and "tensorflow" in meta:  # TensorFlow's XLA step on these inputs, where they were exported
        reference = meta["tensorflow"]["xla"]["loss"]
        result |= {"tensorflow_loss": reference, "loss_relative_error": abs(result["loss"] - reference) / reference}
    if peak_tflops:
        achieved = meta["model_flops_per_token"] * tokens_per_second / 1e12
        result |= {"model_tflops_achieved": round(achieved, 2), "peak_tflops_stated": peak_tflops,
                   "mfu_measured_time_over_stated_peak": round(achieved / peak_tflops, 4)}  # fmt: skip
    return result


def memory_result(figures: dict[str, int], estimate: int | None, allocator: int | None) -> dict:
    """The compiler's peak and its parts in GiB, the estimate and its ratio to the peak, the allocator's peak."""
    result = {f"xla_{kind}_gib": round(figures[kind] / GIB, 3) for kind in ("peak", "argument", "output", "temp")}
    if estimate:
        result |= {
            "estimate_gib": round(estimate / GIB, 3),
            "estimate_over_xla_peak": round(estimate / figures["peak"], 3),
        }
    if allocator is not None:
        result["allocator_peak_gib"] = round(allocator / GIB, 3)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", type=Path, nargs="+", help="the JSON(s) hlo_export.py wrote, the HLO beside each")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--peak-tflops", type=float, help="the device's dense bf16 peak (H200: 989), for MFU")
    parser.add_argument("--values", action="store_true", help="the exported inputs (NAME.npz) instead of made ones")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if "tensorflow" in sys.modules:
        raise SystemExit("hlo_run.py must run without TensorFlow")
    for path in args.json:
        result = run(path, steps=args.steps, warmup=args.warmup, peak_tflops=args.peak_tflops, values=args.values,
                     seed=args.seed)  # fmt: skip
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
