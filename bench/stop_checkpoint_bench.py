"""Stop cost: seconds from SIGTERM to a checkpoint on disk, measured for ``small``, estimated for gpt3-1.3b on p4d.

1. ``train.py`` with the ``small`` preset and ``make run``'s batch (4,096 tokens of 128, one worker) on a tiny
   dataset, sent SIGTERM after step 7: its ``[stopped]`` line says how long the step in flight plus the checkpoint
   took; three trials.
2. TensorFlow's checkpoint write rate on this disk (1 GiB of float32 variables, best of two).
3. From the estimate (``infra/estimate``): a gpt3-1.3b checkpoint is fp32 weights + AdamW moments (the per-device
   state of data parallelism; the 16-bit copy and gradients are not saved), written at the rate of 2., after the
   step in flight (the estimate's step time) on 4 x ml.p4d.24xlarge, then uploaded to S3 by the chief's instance at
   its network bandwidth (``infra/instances.py``), against SageMaker's ~120 s before SIGKILL; and the slowest upload
   that would still fit.

    .venv/bin/python bench/stop_checkpoint_bench.py
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))  # first: its conftest, not the repo's

from conftest import write_dataset  # the training tests' tiny dataset
from infra.estimate.estimate import estimate
from infra.instances import INSTANCE_TYPES
from infra.training_code import model_presets

REPO = Path(__file__).resolve().parents[1]
GRACE_SECONDS = 120
GIB = 2**30


def small_stop(work: Path, trial: int) -> tuple[float, float, int]:
    """(seconds SIGTERM -> checkpoint written, seconds SIGTERM -> process gone, checkpoint bytes)."""
    checkpoints = work / f"ckpt-{trial}"
    args = ["--train_dir", str(work / "tokens"), "--model_preset", "small", "--sequence_length", "128",
            "--vocab_size", "4096", "--global_batch_tokens", "4096", "--micro_batch_size", "16", "--max_steps", "250",
            "--lr_reference_tokens", "0", "--learning_rate", "2e-3", "--checkpoint_every", "50", "--log_every", "1",
            "--eval_every", "0", "--checkpoint_dir", str(checkpoints), "--export_dir", str(work / "model"),
            "--output_dir", str(work / "output")]  # fmt: skip
    process = subprocess.Popen([sys.executable, "train.py", *args], cwd=REPO / "training", stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)  # fmt: skip
    output, sent = "", 0.0
    for line in process.stdout:
        output += line
        if line.startswith("[train] step=7 "):
            sent = time.monotonic()
            process.send_signal(signal.SIGTERM)
    process.wait()
    gone = time.monotonic() - sent
    stopped = re.search(r"^\[stopped\] step=\d+ checkpointed (\S+) s after SIGTERM$", output, re.M)
    if process.returncode != 143 or stopped is None:
        raise RuntimeError(f"train.py did not stop as expected (exit {process.returncode}):\n{output[-2000:]}")
    size = sum(p.stat().st_size for p in checkpoints.glob("ckpt-*") if p.is_file())
    return float(stopped[1]), gone, size


def write_rate(work: Path) -> float:
    """GiB/s of tf.train.Checkpoint.write here, best of two."""
    import tensorflow as tf

    checkpoint = tf.train.Checkpoint(v=[tf.Variable(tf.zeros([64, 1024, 1024])) for _ in range(4)])  # 1 GiB
    best = float("inf")
    for _ in range(2):
        shutil.rmtree(work / "rate", ignore_errors=True)
        began = time.perf_counter()
        checkpoint.write(str(work / "rate" / "ckpt"))
        best = min(best, time.perf_counter() - began)
    shutil.rmtree(work / "rate")
    return 1 / best


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        write_dataset(work / "tokens", sequence_length=128)
        trials = [small_stop(work, trial) for trial in range(3)]
        rate = write_rate(work)
    for checkpointed, gone, size in trials:
        print(f"small: checkpoint of {size / 2**20:.1f} MiB on disk {checkpointed:.2f} s after SIGTERM "
              f"(process gone after {gone:.1f} s: interpreter and TensorFlow teardown)")  # fmt: skip
    print(f"tf.train.Checkpoint.write here: {rate:.2f} GiB/s")
    p = estimate(model_presets()["gpt3-1.3b"], vocab_size=50257, sequence_length=2048, micro_batch_size=4,
             precision="bf16", recompute=True, instance_type="ml.p4d.24xlarge", instance_count=4,
             global_batch_tokens=1048576, train_tokens=300 * 10**9)  # fmt: skip
    size = p.memory.gradients + p.memory.optimizer  # fp32 weights (as many bytes as fp32 gradients) + AdamW m, v
    write = size / GIB / rate
    gbps = INSTANCE_TYPES["ml.p4d.24xlarge"].network_gbps
    upload = size * 8 / 1e9 / gbps  # only the chief writes, so one instance uploads
    seconds = p.step_seconds + write + upload
    slowest = size * 8 / 1e9 / (GRACE_SECONDS - p.step_seconds - write)
    print(f"gpt3-1.3b ({p.parameters / 1e6:,.1f} M parameters), 4 x ml.p4d.24xlarge: checkpoint {size / GIB:.2f} GiB")
    print(f"  step in flight {p.step_seconds:.1f} s + write at {rate:.2f} GiB/s {write:.0f} s + upload at {gbps:.0f} "
          f"Gbps {upload:.1f} s = {seconds:.0f} s of the ~{GRACE_SECONDS} s before SIGKILL; it fits while the upload "
          f"reaches {slowest:.1f} Gbps")  # fmt: skip
    return 0 if seconds < GRACE_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
