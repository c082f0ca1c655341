"""End-to-end runs of train.py: as SageMaker starts it, killed and resumed, on two workers, and its guards."""

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import run.loop
import tensorflow as tf
from data import token_shards
from observe.metrics_test import defined, parse
from pile.sample_corpus import write_mix_corpus
from run.schedule import WarmupCosine
from train import main

from conftest import TINY_RUN, free_ports, write_dataset

TRAINING = Path(__file__).parent
BASE = [
    *TINY_RUN,
    "--cpu_threads",
    "1",
    "--lr_reference_tokens",
    "0",
    "--learning_rate",
    "3e-3",
    "--warmup_steps",
    "2",
]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """training/ as SageMaker receives it: no tests, no conftest."""
    target = tmp_path_factory.mktemp("code") / "code"
    shutil.copytree(TRAINING, target, ignore=shutil.ignore_patterns("*_test.py", "conftest.py", "__pycache__"))
    return target


def run_script(bundle: Path, args: list[str], env: dict, **kwargs) -> subprocess.Popen:
    full_env = {"PATH": os.environ["PATH"], "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1", **env}
    return subprocess.Popen(
        [sys.executable, "train.py", *args],
        cwd=bundle,
        env=full_env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        **kwargs,
    )


def losses(output: str) -> dict[int, str]:
    """step -> the loss and learning-rate part of each [train] line (timing fields differ between runs)."""
    return {int(m[1]): m[2] for m in re.finditer(r"^\[train\] step=(\d+) (loss=\S+ ppl=\S+ lr=\S+)", output, re.M)}


def digests(output: str) -> dict[int, str]:
    return {int(m[1]): m[2] for m in re.finditer(r"^\[final\] worker=(\d+) step=\d+ weights=(\w+)", output, re.M)}


SAGEMAKER_ARGS = [
    *BASE,
    "--max_steps",
    "8",
    "--dropout",
    "0.1",
    "--deterministic",
    "True",
    "--use_xla",
    "False",
    "--checkpoint_every",
    "2",
    "--keep_checkpoints",
    "2",
    "--log_every",
    "1",
    "--eval_every",
    "4",
    "--eval_batches",
    "2",
    "--sample_tokens",
    "8",
    "--model_dir",
    "s3://bucket/job/model",
]


def sagemaker_env(dataset_dir: Path, tmp_path: Path) -> dict:
    """The environment the SageMaker training toolkit gives the script, with folders under tmp_path."""
    # The SDK JSON-encodes every value; the toolkit passes them again as arguments (booleans as True/False).
    hps = {
        "model_preset": '"tiny"',
        "use_xla": "false",
        "recompute": "true",
        "max_steps": "8",
        "model_dir": '"s3://bucket/job/model"',
        "checkpoint_dir": json.dumps(str(tmp_path / "checkpoints")),
    }
    return {
        "SM_HPS": json.dumps(hps),
        "SM_CHANNEL_TRAIN": str(dataset_dir),
        "SM_CHANNEL_VALIDATION": str(dataset_dir / "validation"),
        "SM_MODEL_DIR": str(tmp_path / "model"),
        "SM_OUTPUT_DIR": str(tmp_path / "output"),
        "SM_HOSTS": '["algo-1"]',
        "SM_CURRENT_HOST": "algo-1",
        "SM_NUM_GPUS": "0",
    }


@pytest.fixture(scope="module")
def sagemaker_run(bundle, dataset_dir, tmp_path_factory) -> tuple[Path, str]:
    """One uninterrupted 8-step run started the way SageMaker starts it: (its folder, its output)."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    process = run_script(bundle, SAGEMAKER_ARGS, sagemaker_env(dataset_dir, folder))
    output, _ = process.communicate(timeout=180)
    assert process.returncode == 0, output
    return folder, output


def test_runs_as_the_sagemaker_toolkit_starts_it(sagemaker_run, dataset_dir):
    folder, output = sagemaker_run
    lines = output.splitlines()
    train = [line for line in lines if line.startswith("[train]")]
    valid = [line for line in lines if line.startswith("[valid]")]
    split = [line for line in lines if line.startswith("[valid_split]")]  # the whole split, once at the end
    sample = {"validation:loss", "validation:loss_standard_error", "validation:perplexity"}
    sample |= {"validation:bits_per_byte", "validation:bits_per_byte_standard_error"}
    assert len(train) == 8 and all(parse(line).keys() == defined("train") for line in train), output
    assert len(valid) == 2 and all(parse(line).keys() == sample for line in valid), output
    assert len(split) == 1 and parse(split[0]).keys() == defined("validation") - sample, output
    assert any(line.startswith("[sample] ") and len(line) > 9 for line in lines)
    assert "engine=default workers=1 replicas=1" in output
    assert not (folder / "output" / "failure").exists()
    assert (folder / "model" / "1" / "saved_model.pb").is_file()
    assert (folder / "model" / "tokenizer.json").read_bytes() == (dataset_dir / "tokenizer.json").read_bytes()
    hf = folder / "model" / "hf"  # the Hugging Face checkpoint, on by default
    assert sorted(p.name for p in hf.iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert json.loads((hf / "config.json").read_text())["n_layer"] == 2 and "[export] " + str(hf) in output
    assert sorted(p.name for p in (folder / "checkpoints").glob("*.index")) == ["ckpt-6.index", "ckpt-8.index"]
    served = tf.saved_model.load(str(folder / "model" / "1")).signatures["serving_default"]
    out = served(
        prompt_ids=tf.constant([[1, 2]]),
        max_new_tokens=tf.constant(3),
        temperature=tf.constant(0.0),
        top_k=tf.constant(0),
        seed=tf.constant(0),
    )["token_ids"]
    assert out.shape == (1, 3)


def test_killed_run_resumes_with_the_uninterrupted_loss_sequence(sagemaker_run, bundle, dataset_dir, tmp_path):
    _, expected = sagemaker_run
    env = sagemaker_env(dataset_dir, tmp_path)
    interrupted = run_script(bundle, SAGEMAKER_ARGS, env)
    seen = ""
    for line in interrupted.stdout:  # kill -9 once step 5 is done: a checkpoint of step 4 exists
        seen += line
        if line.startswith("[train] step=5 "):
            interrupted.send_signal(signal.SIGKILL)
            break
    interrupted.wait(timeout=60)
    assert interrupted.returncode == -signal.SIGKILL, seen

    resumed = run_script(bundle, SAGEMAKER_ARGS, env)
    output, _ = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, output
    start_step = int(re.search(r"start_step=(\d+)", output)[1])
    assert start_step in (2, 4)  # 4 unless the kill came while step 4's checkpoint was still being written
    assert sorted(losses(output)) == list(range(start_step + 1, 9))
    assert all(losses(output)[s] == losses(expected)[s] for s in losses(output)), (output, expected)
    assert re.findall(r"^\[valid\] step=8 .*$", output, re.M) == re.findall(r"^\[valid\] step=8 .*$", expected, re.M)
    assert digests(output) == digests(expected)  # bit-identical final weights


def test_sigterm_checkpoints_the_step_in_flight_and_the_resume_starts_there(
    sagemaker_run, bundle, dataset_dir, tmp_path
):
    _, expected = sagemaker_run
    env = sagemaker_env(dataset_dir, tmp_path)
    args = [*SAGEMAKER_ARGS, "--checkpoint_every", "4"]  # checkpoints at 4 and 8; the stop comes between them
    stopped = run_script(bundle, args, env)
    seen = ""
    for line in stopped.stdout:
        seen += line
        if line.startswith("[train] step=5 "):
            stopped.send_signal(signal.SIGTERM)
    stopped.wait(timeout=60)
    assert stopped.returncode == 143, seen  # 128 + SIGTERM, after the checkpoint
    stop_step = int(re.search(r"^\[stopped\] step=(\d+) checkpointed \S+ s after SIGTERM$", seen, re.M)[1])
    assert 4 < stop_step < 8 and f"[train] step={stop_step + 1} " not in seen, seen
    assert not (tmp_path / "model" / "1").exists() and not (tmp_path / "output" / "failure").exists()

    resumed = run_script(bundle, args, env)
    output, _ = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, output
    assert f"start_step={stop_step} " in output
    assert sorted(losses(output)) == list(range(stop_step + 1, 9))
    assert all(losses(output)[s] == losses(expected)[s] for s in losses(output)), (output, expected)
    assert digests(output) == digests(expected)


TWO_WORKER_ARGS = [*BASE, "--max_steps", "3", "--log_every", "1", "--eval_every", "0", "--sample_tokens", "0",
                   "--checkpoint_every", "2", "--seed", "1234", "--global_batch_tokens", "64"]  # fmt: skip


def timed_lines(process: subprocess.Popen) -> tuple[list[tuple[float, str]], threading.Thread]:
    """Collects (time read, line) of a process's output in a thread; the last entry is (end of output, "")."""
    lines: list[tuple[float, str]] = []

    def read():
        lines.extend((time.monotonic(), line) for line in process.stdout)
        lines.append((time.monotonic(), ""))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return lines, thread


@pytest.fixture(scope="module")
def two_worker_run(bundle, dataset_dir, tmp_path_factory) -> tuple[Path, list[list[tuple[float, str]]]]:
    """3 steps on two local workers (MultiWorkerMirroredStrategy), checkpoints at 2 and 3: (folder, timed outputs)."""
    folder = tmp_path_factory.mktemp("two_workers")
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    processes, outputs = [], []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = {
            "TF_CONFIG": json.dumps(tf_config),
            "SM_HOSTS": '["algo-1", "algo-2"]',
            "SM_CURRENT_HOST": f"algo-{index + 1}",
            "SM_MODEL_DIR": str(folder / f"model-{index}"),
            "SM_OUTPUT_DIR": str(folder / f"output-{index}"),
        }
        args = [*TWO_WORKER_ARGS, "--train_dir", str(dataset_dir), "--checkpoint_dir", str(folder / "ckpt")]
        args += ["--sample_tokens", "3000"]  # the chief works on for ~10 s after training: longer than TF waits
        args += ["--hf_checkpoint", "false"]
        processes.append(run_script(bundle, args, env))  # engine auto: TF_CONFIG -> multi_worker
    readers = [timed_lines(p) for p in processes]
    for process, (lines, thread) in zip(processes, readers, strict=True):
        process.wait(timeout=180)
        thread.join(timeout=10)
        outputs.append(lines)
    assert [p.returncode for p in processes] == [0, 0], outputs
    return folder, outputs


def text(lines: list[tuple[float, str]]) -> str:
    return "".join(line for _, line in lines)


def test_two_workers_end_identical_and_match_one_process_on_the_global_batch(two_worker_run, dataset_dir):
    from data.channel import open_channel, token_dataset
    from gpt.model import GPT
    from keras.utils import set_random_seed
    from run.schedule import WarmupCosine
    from run.trainer import Trainer, make_optimizer
    from run.trainer_test import default_engine

    folder, (chief_lines, other_lines) = two_worker_run
    chief, other = text(chief_lines), text(other_lines)
    steps, seed = 3, 1234
    assert "engine=multi_worker workers=2 replicas=2" in chief
    assert "[train]" not in other  # only the chief logs metrics
    assert digests(chief)[0] == digests(other)[1]  # bit-identical weights on both workers
    assert (folder / "model-0" / "1").is_dir() and not (folder / "model-1").exists()  # chief exports
    assert not (folder / "model-0" / "hf").exists()  # hf_checkpoint false
    # The workers leave together: the other worker waits for the chief's export and sample, so the chief never
    # sees it vanish ("The tasks have crashed ... stopped sending heartbeats" before).
    sampled = next(t for t, line in chief_lines if line.startswith("[sample]"))
    assert other_lines[-1][0] >= sampled and "stopped sending heartbeats" not in chief, (chief, other)

    # One process, one replica, on the same global batch: the 4 sequences the two workers shared.
    set_random_seed(seed)
    ds = token_dataset(open_channel(dataset_dir, "train"), sequence_length=16, batch_shape=(1, 1, 4), seed=seed)
    model = GPT.from_preset("tiny", vocab_size=384, sequence_length=16, seed=seed)
    optimizer = make_optimizer(model, WarmupCosine(3e-3, 2, steps, 0.1))
    trainer = Trainer(model, optimizer, default_engine(), accumulation_steps=1, micro_batch_size=4, sequence_length=16)
    reference = [trainer.train_step(batch).loss for batch in ds.take(steps)]
    logged = [float(re.search(r"loss=(\S+)", losses(chief)[s])[1]) for s in range(1, steps + 1)]
    # Same arithmetic, different summation order (ring all-reduce vs one batch): equal to the 4 logged decimals.
    np.testing.assert_allclose(logged, reference, atol=2e-4)


def test_a_two_worker_checkpoint_resumes_on_one_worker_with_the_same_data(
    two_worker_run, bundle, dataset_dir, tmp_path
):
    folder, (chief_lines, _) = two_worker_run
    checkpoints = tmp_path / "ckpt"
    shutil.copytree(folder / "ckpt", checkpoints, ignore=shutil.ignore_patterns("ckpt-3.*"))
    (checkpoints / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')  # as if stopped at step 2
    args = [*TWO_WORKER_ARGS, "--train_dir", str(dataset_dir), "--checkpoint_dir", str(checkpoints)]
    env = {"SM_MODEL_DIR": str(tmp_path / "model"), "SM_OUTPUT_DIR": str(tmp_path / "output")}
    resumed = run_script(bundle, args, env)
    output, _ = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, output
    assert "workers=1 replicas=1 params=125696 global_batch_tokens=64 accumulation_steps=2" in output
    assert "start_step=2 " in output and "data settings changed" not in output
    # Step 3's global batch is the same 4 sequences, now 2 micro-batches of one worker: the same loss, up to the
    # order of the sums.
    two_workers = float(re.search(r"loss=(\S+)", losses(text(chief_lines))[3])[1])
    assert sorted(losses(output)) == [3]
    assert float(re.search(r"loss=(\S+)", losses(output)[3])[1]) == pytest.approx(two_workers, abs=2e-4)


def failing_run(dataset_dir, tmp_path, *extra) -> tuple[int, str]:
    output = tmp_path / "output"
    code = main(
        [
            *BASE,
            "--train_dir",
            str(dataset_dir),
            "--output_dir",
            str(output),
            "--checkpoint_dir",
            str(tmp_path / "ckpt"),
            "--export_dir",
            str(tmp_path / "model"),
            *extra,
        ],
        env={},
    )
    return code, (output / "failure").read_text() if (output / "failure").exists() else ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sequence_length", "33"], "sequence_length 33 is longer than the train shards' 32"),
        (["--vocab_size", "100"], "vocabulary mismatch: vocab_size 100 is smaller than the tokenizer's 384"),
        (["--global_batch_tokens", "100"], "expected a multiple of micro_batch_size x sequence_length x replicas"),
        (["--validation_dir", "/nonexistent"], "the validation channel /nonexistent does not exist"),
        (["--source_weights", "web=1"], "source_weights: the train split's shards name no source"),
    ],
)
def test_bad_configurations_fail_before_compute_with_a_failure_file(dataset_dir, tmp_path, extra, message):
    code, failure = failing_run(dataset_dir, tmp_path, *extra)
    assert code == 1 and message in failure, failure
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "model").exists()


def test_tokenizer_and_manifest_disagreeing_is_a_vocabulary_mismatch(tmp_path):
    dataset = write_dataset(tmp_path / "d")
    manifest = token_shards.read_manifest(dataset)
    manifest.vocab_size = 500
    token_shards.write_manifest_part(dataset, "algo-1", manifest)
    code, failure = failing_run(dataset, tmp_path)
    assert code == 1 and "vocabulary mismatch: tokenizer.json has 384 ids, the manifest says 500" in failure


def test_missing_train_channel_is_a_clear_error(tmp_path):
    code = main(["--output_dir", str(tmp_path / "out")], env={})
    assert code == 1 and "no train channel: set SM_CHANNEL_TRAIN" in (tmp_path / "out" / "failure").read_text()


def test_a_diverging_loss_stops_training_and_leaves_only_finite_checkpoints(dataset_dir, tmp_path, monkeypatch):
    """A peak learning rate of 1e30 diverges in a step; the CLI refuses it (at most 1), so the schedule is given it.

    Every later step is skipped (none reaches the weights); the job ends once more are skipped than the health rule
    allows in its window, here 3, at the log line of the fourth skipped step (steps 2-5)."""
    monkeypatch.setattr(run.loop, "WarmupCosine", lambda peak, *rest: WarmupCosine(1e30, *rest))
    code, failure = failing_run(
        dataset_dir,
        tmp_path,
        "--warmup_steps",
        "0",
        "--checkpoint_every",
        "1",
        "--max_steps",
        "10",
        "--eval_every",
        "0",
        "--log_every",
        "1",
        "--health_rules",
        '{"max_skipped_steps": 3}',
    )
    assert (
        code == 1
        and "NonFiniteLoss: 4 steps skipped for a non-finite loss or gradient in the 1000 steps to "
        "step 5 (health_rules max_skipped_steps 3)"
        in failure
    ), failure
    newest = tf.train.latest_checkpoint(str(tmp_path / "ckpt"))
    assert newest is not None
    reader = tf.train.load_checkpoint(newest)
    for name in reader.get_variable_to_shape_map():
        value = reader.get_tensor(name)
        if np.issubdtype(np.asarray(value).dtype, np.floating):
            assert np.isfinite(value).all(), name
    assert not (tmp_path / "model").exists()


def test_a_mix_of_two_sources_trains_by_weight_and_reports_each_sources_validation(mixed_dataset_dir, tmp_path, capsys):
    code, failure = failing_run(mixed_dataset_dir, tmp_path, "--source_weights", "code=1")
    assert (
        code == 1
        and "source_weights: the train split's source mail has no weight: weight every one of code, mail" in failure
    )
    capsys.readouterr()
    args = ["--source_weights", "mail=1,code=3", "--max_steps", "4", "--eval_every", "2", "--eval_batches", "2"]
    args += ["--sample_tokens", "0", "--hf_checkpoint", "False", "--tensorboard_dir", str(tmp_path / "tb")]
    code, failure = failing_run(mixed_dataset_dir, tmp_path, *args)
    output = capsys.readouterr().out
    assert code == 0, failure + output
    # 4 steps of 2 sequences: 6 of code (of its 1,985 records), 2 of mail (of 1,984)
    assert "weight_code=0.7500 sequences_code=6 epochs_code=0.003 weight_mail=0.2500 sequences_mail=2 " in output
    valid = [line for line in output.splitlines() if line.startswith("[valid]")]
    assert len(valid) == 2, output
    for line in valid:
        figures = dict(re.findall(r"(\w+)=(\S+)", line))
        assert {f"{k}_{s}" for k in ("val_loss", "val_bpb", "val_bpb_se") for s in ("code", "mail")} <= figures.keys()
        assert figures["val_bpb_code"] != figures["val_bpb_mail"] and float(figures["val_bpb_se_mail"]) > 0
    (split,) = [line for line in output.splitlines() if line.startswith("[valid_split]")]
    figures = {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.]+)", split)}
    # The whole split is the sources' sequences together: 221 of code, 220 of mail, each once.
    assert figures["sequences"] == 441
    mean = (221 * figures["val_loss_code"] + 220 * figures["val_loss_mail"]) / 441
    assert figures["val_loss"] == pytest.approx(mean, abs=1e-4)
    report = (tmp_path / "tb" / "training-report.html").read_text()
    assert "Validation: code" in report and "Validation: mail" in report and "<td>whole split: mail</td>" in report


def test_a_run_on_a_mix_resumed_from_its_checkpoint_continues_the_uninterrupted_losses(mixed_dataset_dir, tmp_path):
    mix = ["--source_weights", "code=1,mail=4", "--eval_every", "0", "--sample_tokens", "0", "--hf_checkpoint", "False"]
    mix += ["--decay_steps", "6", "--deterministic", "True", "--log_every", "1"]

    def run(folder: str, steps: int) -> dict[int, str]:
        with contextlib.redirect_stdout(io.StringIO()) as output:
            code, failure = failing_run(mixed_dataset_dir, tmp_path / folder, *mix, "--max_steps", str(steps))
        assert code == 0, failure
        return losses(output.getvalue())

    uninterrupted = run("whole", 6)
    assert sorted(run("resumed", 3)) == [1, 2, 3]
    resumed = run("resumed", 6)  # restores step 3's checkpoint: the mix continues at sequence 3 x 2
    assert sorted(resumed) == [4, 5, 6] and resumed == {s: uninterrupted[s] for s in (4, 5, 6)}


def test_a_two_source_corpus_preprocessed_then_trained_on_by_weight(tmp_path, capsys):
    documents = [(f"Document {i}: " + "words of text " * (20 + i % 7), "Github") for i in range(400)]
    write_mix_corpus(tmp_path / "raw", documents[0::2], [text for text, _ in documents[1::2]])
    common = ["--source=pile:1", "--source=web:3", "--input_dir", tmp_path / "raw", "--tokenizer_dir", tmp_path / "tok"]
    for mode, args in (
        ("tokenizer", ["--vocab_size", "384", "--output_dir", tmp_path / "tok"]),
        ("shards", ["--sequence_length", "16", "--validation_fraction", "0.1", "--output_dir", tmp_path / "data"]),
    ):
        command = [sys.executable, "preprocess.py", mode, *map(str, common + args), "--workers", "1"]
        done = subprocess.run(command, cwd=TRAINING, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    assert set(token_shards.read_manifest(tmp_path / "data").sources) == {"pile", "web"}
    args = ["--source_weights", "pile=1,web=3", "--max_steps", "4", "--eval_every", "4", "--eval_batches", "1"]
    code, failure = failing_run(tmp_path / "data", tmp_path, *args, "--sample_tokens", "0", "--hf_checkpoint", "False")
    output = capsys.readouterr().out
    assert code == 0, failure + output
    assert "weight_pile=0.2500 sequences_pile=2 " in output and "weight_web=0.7500 sequences_web=6 " in output
    (valid,) = [line for line in output.splitlines() if line.startswith("[valid]")]
    assert "val_bpb_pile=" in valid and "val_bpb_web=" in valid
