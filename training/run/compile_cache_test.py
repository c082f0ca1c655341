import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import TINY_RUN
from run import compile_cache

TRAINING = Path(__file__).parents[1]


def test_the_first_host_writes_the_cache_in_the_checkpoint_folder_the_others_only_read_it(tmp_path):
    (tmp_path / "xla-cache").mkdir()
    (tmp_path / "xla-cache" / "entry.pbvm-1-2.tmp").write_bytes(b"half")  # a write that was killed
    env = {"TF_XLA_FLAGS": "--tf_xla_auto_jit=0", "SM_CURRENT_INSTANCE_TYPE": "ml.p4d.24xlarge"}
    assert compile_cache.configure(tmp_path, writer=True, env=env) == tmp_path / "xla-cache"
    flags = env["TF_XLA_FLAGS"].split()
    assert flags[:3] == ["--tf_xla_auto_jit=0", f"--tf_xla_persistent_cache_directory={tmp_path / 'xla-cache'}",
                         "--tf_xla_persistent_cache_read_only=false"]  # fmt: skip
    assert re.fullmatch(r"--tf_xla_persistent_cache_prefix=tf-2\.[\d.]+-ml\.p4d\.24xlarge", flags[3])
    assert not list(tmp_path.glob("*/*.tmp"))
    reader = {}
    compile_cache.configure(tmp_path / "elsewhere", writer=False, env=reader)
    assert "--tf_xla_persistent_cache_read_only=true" in reader["TF_XLA_FLAGS"]
    assert not (tmp_path / "elsewhere").exists()
    given = {"TF_XLA_FLAGS": "--tf_xla_persistent_cache_directory=/mine"}
    assert compile_cache.configure(tmp_path, writer=True, env=given) is None
    assert given == {"TF_XLA_FLAGS": "--tf_xla_persistent_cache_directory=/mine"}


def train(dataset_dir: Path, checkpoints: Path, steps: int) -> str:
    """train.py in a fresh process, the micro-step compiled with XLA, TensorFlow's persistor logging what it does."""
    folder = checkpoints.parent
    args = [*TINY_RUN, "--train_dir", str(dataset_dir), "--checkpoint_dir", str(checkpoints), "--use_xla", "True",
            "--max_steps", str(steps), "--checkpoint_every", "2", "--eval_every", "0", "--sample_tokens", "0",
            "--model_dir", str(folder / "model"), "--output_dir", str(folder / "output")]  # fmt: skip
    env = {"PATH": os.environ["PATH"], "TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "device_executable_persistor=1"}
    ran = subprocess.run([sys.executable, "train.py", *args], cwd=TRAINING, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    return ran.stderr


def test_a_resumed_run_loads_the_compiled_micro_step_that_the_first_run_left_in_the_checkpoint_folder(
    dataset_dir, tmp_path
):
    # TensorFlow 2.21 honours the flag on this CPU as on a GPU (tensorflow/compiler/jit/device_compiler.h's
    # CompileStrict: load an entry before compiling, persist one after); the entry's device type is XLA_CPU_JIT here.
    checkpoints = tmp_path / "checkpoints"
    first = train(dataset_dir, checkpoints, steps=2)
    assert "Serializing and saving cache entry: __inference__micro_grads_fn" in first
    entries = sorted(p.name for p in (checkpoints / "xla-cache").iterdir())
    assert entries and all(re.fullmatch(r"tf-2\.[\d.]+-local__\d+__\d+__XLA_CPU_JIT\.pb", e) for e in entries), entries
    resumed = train(dataset_dir, checkpoints, steps=4)  # restores ckpt-2 and trains steps 3 and 4
    assert "Loading cached entry for: __inference__micro_grads_fn" in resumed
    assert "Serializing and saving cache entry: __inference__micro_grads_fn" not in resumed
