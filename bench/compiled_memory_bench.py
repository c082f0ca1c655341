"""The memory estimate of compiled steps against XLA's own figure for them.

Under XLA (``use_xla``, the GPU default) the micro-step's memory is what XLA's scheduler and buffer assignment make
of its HLO, not what TensorFlow's executor does op by op (the bridge drops control dependencies, so the ordering
edges in ``gpt/`` do not reach it). For each case this bench exports the micro-step's HLO (``hlo_export.py``, in a
fresh process of this Python, with TensorFlow), compiles it with jaxlib for a GPU (``hlo_compile.py`` on a Python
with jax and its CUDA plugin, deviceless: XLA's GPU pipeline without a GPU), and holds the compiler's peak
(``argument + output - alias + temp``: the step's float32 weights, tokens and loss scale, its gradients and its
temporaries, all allocated for the whole execution) against ``infra/estimate/memory.py``'s figure for the same
tensors, ``Memory.micro_step`` (the model state but the optimizer's and the running sum's, which live outside the
compiled step, plus the activations and the logits), computed with ``xla=True``.

The cases are the micro-steps of ``estimate_vs_measured_bench.py``'s cases (its accumulation and pipeline cases add
no other compiled step: a pipeline is not compiled) and the GPT-3 presets at prod's micro-batch of 4, context
2,048, bf16, full recomputation (gpt3-1.3b is prod's). ``--quick``: the small cases only (about 2 minutes here).

    .venv/bin/python bench/compiled_memory_bench.py --jax-python .venv-jax/bin/python
    .venv/bin/python bench/compiled_memory_bench.py --target h200 --keep build/hlo-memory

Exits 1 when an estimate is off the compiler's figure by more than 10%.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "training")]

from infra.estimate.memory import stage_memories  # noqa: E402  (after the path set-up)
from infra.training_code import model_presets  # noqa: E402

TOLERANCE = 0.10
CASES = [  # preset, vocabulary, sequence, micro-batch, precision, recompute
    ("tiny", 50_257, 256, 8, "fp32", False),
    ("small", 8_192, 512, 8, "fp32", False),
    ("small", 8_192, 512, 8, "fp32", True),
    ("small", 8_192, 512, 8, "bf16", False),
    ("small", 50_257, 256, 8, "fp32", False),
    ("gpt3-125m", 50_257, 2_048, 4, "bf16", True),
    ("gpt3-350m", 50_257, 2_048, 4, "bf16", True),
    ("gpt3-1.3b", 50_257, 2_048, 4, "bf16", True),
]
QUICK = CASES[:5]


def name(case: tuple) -> str:
    preset, vocab, seq, micro, precision, recompute = case
    return f"{preset} V={vocab} s={seq} b={micro} {precision}{' recompute' if recompute else ''}"


def estimate_bytes(case: tuple) -> int:
    """``memory.py``'s figure for the compiled micro-step of ``case`` (``Memory.micro_step``, ``xla=True``)."""
    preset, vocab, seq, micro, precision, recompute = case
    memory = stage_memories(
        model_presets()[preset], vocab_size=vocab, sequence_length=seq, micro_batch=micro, precision=precision,
        optimizer="adamw", recompute=recompute, model_parallel_degree=1, accumulation_steps=1, xla=True,
    )[0]  # fmt: skip
    return memory.micro_step


def out_of_bounds(estimate: int, compiled: int, tolerance: float = TOLERANCE) -> bool:
    """Whether the estimate is off the compiler's figure by more than ``tolerance`` of it."""
    return abs(estimate / compiled - 1) > tolerance


def compile_case(case: tuple, out: Path, jax_python: str, target: str) -> dict:
    """Exports the case's HLO (a fresh TensorFlow process) and compiles it for ``target`` (``jax_python``)."""
    preset, vocab, seq, micro, precision, recompute = case
    shape = ["--preset", preset, "--vocab", str(vocab), "--sequence-length", str(seq), "--micro-batch", str(micro)]
    export = [sys.executable, str(HERE / "hlo_export.py"), *shape, "--precision", precision, "--out", str(out)]
    export += [] if recompute else ["--no-recompute"]
    start = time.perf_counter()
    meta = Path(subprocess.run(export, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
    exported = time.perf_counter() - start
    ran = subprocess.run([jax_python, str(HERE / "hlo_compile.py"), str(meta), "--target", target],
                         capture_output=True, text=True, check=False)  # fmt: skip
    if ran.returncode:
        raise SystemExit(f"hlo_compile.py failed on {meta}:\n{ran.stderr[-3000:]}")
    return json.loads(ran.stdout.splitlines()[-1]) | {"export_s": round(exported, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jax-python", default=str(HERE.parent / ".venv-jax" / "bin" / "python"),
                        help="a Python with bench/requirements-jax.txt, the CUDA plugin included")  # fmt: skip
    parser.add_argument("--target", default="a100-40gb", help="a GPU of hlo_compile.GPU_TARGETS (prod's: a100-40gb)")
    parser.add_argument("--quick", action="store_true", help="the small cases only")
    parser.add_argument("--keep", type=Path, help="write the HLOs here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        out = args.keep or Path(scratch)
        rows = []
        for case in QUICK if args.quick else CASES:
            compiled = compile_case(case, out, args.jax_python, args.target)
            rows.append((case, estimate_bytes(case), compiled))
            print(f"  {name(case)}: {json.dumps(compiled)}", file=sys.stderr, flush=True)
    print(f"{'case':<40}{'estimate MiB':>13}{'XLA MiB':>10}{'ratio':>7}   (XLA: args + results + temp; {args.target})")
    failed = 0
    for case, estimate, compiled in rows:
        figures = compiled["memory_bytes"]
        bad = out_of_bounds(estimate, figures["peak"])
        failed += bad
        print(f"{name(case):<40}{estimate / 2**20:>13,.0f}{figures['peak'] / 2**20:>10,.0f}"
              f"{estimate / figures['peak']:>7.2f}{'  OUT OF BOUNDS' if bad else ''}"
              f"   temp {figures['temp'] / 2**20:,.0f}, compiled in {compiled['compile_s']} s")  # fmt: skip
    print(f"{failed} of {len(rows)} cases off the compiler's figure by more than {TOLERANCE:.0%}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
