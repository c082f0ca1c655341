"""TensorFlow's loss and jaxlib's from the same exported HLO and the same inputs: the tiny preset, on this CPU.

For fp32 and bf16 (mixed, the prod precision), recompute on, GPT-2's vocabulary: ``hlo_export.py`` (here, in
TensorFlow) writes the micro-step's HLO, its inputs and TensorFlow's loss and gradient norm from running the
same XLA-compiled step; ``hlo_run.py --values`` (a subprocess on a Python with jax and no TensorFlow) compiles
that HLO with jaxlib and runs it on those inputs. Relative limits: 1e-5 on the loss and fp32's gradient norm
(the norm over every weight's gradient); 1e-3 on bf16's, because jaxlib's newer XLA rounds bf16 intermediates
differently on the CPU (measured 3e-5 here; TensorFlow's own graph and XLA steps were 8e-4 apart at context
64, vocabulary 512). Exits 1 when one is outside its limit.

    .venv/bin/python bench/hlo_parity_bench.py  # jax from .venv-jax (make bench builds it), or --jax-python
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import hlo_export

HERE = Path(__file__).resolve().parent
LIMITS = {"fp32": {"loss": 1e-5, "grad_norm": 1e-5}, "bf16": {"loss": 1e-5, "grad_norm": 1e-3}}
SHAPE = ["--preset", "tiny", "--micro-batch", "2", "--sequence-length", "128", "--vocab", "50257"]


def parity(precision: str, out: Path, jax_python: str) -> list[str]:
    """One precision's comparison; the lines of the table, the failures marked."""
    options = [*SHAPE, "--precision", precision, "--values", "--out", str(out)]
    meta_path = hlo_export.export(hlo_export.parse_args(options))
    ran = subprocess.run([jax_python, str(HERE / "hlo_run.py"), str(meta_path), "--values", "--steps", "1"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    if ran.returncode:
        raise SystemExit(f"hlo_run.py failed on {jax_python}:\n{ran.stderr[-2000:]}")
    jaxlib = json.loads(ran.stdout.splitlines()[-1])
    tensorflow = json.loads(meta_path.read_text())["tensorflow"]["xla"]
    lines = []
    for key, limit in LIMITS[precision].items():
        error = abs(jaxlib[key] - tensorflow[key]) / abs(tensorflow[key])
        mark = "ok" if error <= limit else "FAIL"
        lines.append(f"{precision:5} {key:9} TF {tensorflow[key]:.9f}  jaxlib {jaxlib[key]:.9f}  "
                     f"relative {error:.2e} (limit {limit:.0e}) {mark}")  # fmt: skip
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jax-python", default=str(HERE.parent / ".venv-jax" / "bin" / "python"),
                        help="a Python with bench/requirements-jax.txt (make bench builds .venv-jax)")  # fmt: skip
    args = parser.parse_args()
    if not Path(args.jax_python).exists():
        raise SystemExit(f"--jax-python {args.jax_python} does not exist: pip install -r bench/requirements-jax.txt")
    with tempfile.TemporaryDirectory() as out:
        lines = [line for precision in LIMITS for line in parity(precision, Path(out), args.jax_python)]
    print("\n".join(lines))
    return 1 if any(line.endswith("FAIL") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
