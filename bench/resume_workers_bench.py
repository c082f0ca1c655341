"""Resume on another cluster: losses after a checkpoint of step 2 resumed on 2 -> 1 and 1 -> 2 local workers.

Four ``train.py`` runs of the ``tiny`` preset (global batch 64 tokens, 4 steps, checkpoints at 2 and 4) on the
training tests' tiny dataset: uninterrupted on 2 workers (MultiWorkerMirroredStrategy on 127.0.0.1) and on 1;
then each one's step-2 checkpoint resumed on the other worker count. The data order is exact (tested in
``training/data/channel_test.py``); the losses agree within reduction-order noise: printed to the 4 logged decimals.

    .venv/bin/python bench/resume_workers_bench.py

Exits 1 when a resumed loss differs from the uninterrupted 2-worker run's by more than 2e-4.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))  # its conftest, not the repo's

from conftest import free_ports, write_dataset  # the training tests' tiny dataset and local cluster ports

TRAINING = Path(__file__).resolve().parents[1] / "training"
ARGS = ["--model_preset", "tiny", "--sequence_length", "16", "--micro_batch_size", "2", "--cpu_threads", "1",
        "--lr_reference_tokens", "0", "--learning_rate", "3e-3", "--warmup_steps", "2", "--max_steps", "4",
        "--log_every", "1", "--eval_every", "0", "--sample_tokens", "0", "--checkpoint_every", "2",
        "--global_batch_tokens", "64"]  # fmt: skip


def train(work: Path, workers: int, checkpoints: str) -> dict[int, float]:
    """step -> loss of the chief's [train] lines."""
    cluster = [f"127.0.0.1:{port}" for port in free_ports(workers)]
    processes = []
    for index in range(workers):
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "SM_MODEL_DIR": str(work / f"model-{checkpoints}-{index}"),
               "SM_OUTPUT_DIR": str(work / f"output-{checkpoints}-{index}")}  # fmt: skip
        if workers > 1:
            env["TF_CONFIG"] = json.dumps({"cluster": {"worker": cluster}, "task": {"type": "worker", "index": index}})
        argv = [*ARGS, "--train_dir", str(work / "tokens"), "--checkpoint_dir", str(work / checkpoints)]
        processes.append(subprocess.Popen([sys.executable, "train.py", *argv], cwd=TRAINING, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))  # fmt: skip
    outputs = [p.communicate()[0] for p in processes]
    if any(p.returncode for p in processes):
        raise RuntimeError(outputs[0][-2000:])
    return {int(m[1]): float(m[2]) for m in re.finditer(r"^\[train\] step=(\d+) loss=(\S+)", outputs[0], re.M)}


def rewind(folder: Path) -> None:
    """Keeps the step-2 checkpoint only, as if the run had stopped there."""
    for path in folder.glob("ckpt-4.*"):
        path.unlink()
    (folder / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        write_dataset(work / "tokens")
        runs = {"2 workers": train(work, 2, "two"), "1 worker": train(work, 1, "one")}
        rewind(work / "two")
        rewind(work / "one")
        runs["2 -> 1 at step 2"] = train(work, 1, "two")
        runs["1 -> 2 at step 2"] = train(work, 2, "one")
    reference = runs["2 workers"]
    for name, steps in runs.items():
        print(f"{name:18s}" + "  ".join(f"step {s}: {loss:.4f}" for s, loss in sorted(steps.items())))
    worst = max(abs(loss - reference[s]) for steps in runs.values() for s, loss in steps.items())
    print(f"largest difference from the uninterrupted 2-worker run: {worst:.4f}")
    return 0 if worst <= 2e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
