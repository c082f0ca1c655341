"""``make run`` end to end with a tiny model: the synthesized state machine, run here, from raw text to a model.

Each run synthesizes the stack, preprocesses (once per runs folder), trains two "hosts" with
MultiWorkerMirroredStrategy and, when asked, deploys; a few tens of seconds each on two cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.synth import ROOT

# About 20 minutes together on a CI machine of two cores; a run's own wait (finish) is 900 s.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

TINY = {
    "dataset": {"name": "e2e"},
    "corpus": {"tokenizer_sample_bytes": "2M"},
    "preprocessing": {"vocab_size": 2048},
    "training": {"model_preset": "tiny", "sequence_length": 64, "global_batch_tokens": 2048, "train_tokens": 2048 * 30},
    "hyperparameters": {
        "eval_every": 15,
        "checkpoint_every": 10,
        "log_every": 5,
        "sample_tokens": 8,
        "warmup_steps": 5,
    },
    "deploy": True,
}


def local_run(runs: Path, name: str, overrides: dict, tmp_path: Path, *flags: str, **popen) -> subprocess.Popen:
    input_file = tmp_path / f"{name}.json"
    input_file.write_text(json.dumps(overrides))
    argv = [
        sys.executable,
        "-m",
        "local.run",
        "--runs",
        str(runs),
        "--execution-name",
        name,
        "--input",
        str(input_file),
        "--corpus-mb",
        "4",
        *flags,
    ]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def finish(process: subprocess.Popen) -> tuple[int, str]:
    output, _ = process.communicate(timeout=900)
    return process.returncode, output


def result(runs: Path, name: str) -> dict:
    return json.loads((runs / "executions" / name / "result.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runs")


def test_full_run_produces_a_model_that_loads_and_answers(runs: Path, tmp_path: Path):
    code, output = finish(local_run(runs, "full", TINY, tmp_path))
    assert code == 0, output[-3000:]
    out = result(runs, "full")["output"]
    for state in ("▶ Plan", "▶ TrainTokenizer", "▶ WriteShards", "▶ StartDataSync", "▶ Train", "▶ CreateEndpoint"):
        assert state in output
    metrics = {m["MetricName"]: m["Value"] for m in out["training"]["Job"]["FinalMetricDataList"]}
    assert {"train:loss", "train:tokens_per_second", "validation:loss", "validation:perplexity"} <= set(metrics)
    assert out["deployment"]["status"]["EndpointStatus"] == "InService"  # the exported model loaded and generated
    answer = out["deployment"]["status"]["Response"][0]["generated_text"]
    assert answer.startswith("def main(") and len(answer) > len("def main("), f"no new text: {answer!r}"
    assert "Execution SUCCEEDED" in output and "Training loss" in output
    assert (runs / "executions" / "full" / "loss.png").stat().st_size > 1000
    assert "Health         input-bound: " in output and "Health         loss not decreasing: " in output
    report = re.search(r"Report         (\S+training-report\.html)", output)[1]
    assert Path(report).read_text().count("<svg") == 8  # uploaded with the job's TensorBoard folder; a chart a source
    assert "health:input_wait_percent" in metrics
    # make run's default corpus is a mix of two sources, each with its own validation figures
    assert {"validation:source_bits_per_byte:pile", "validation:source_bits_per_byte:web"} <= set(metrics)
    assert re.search(r"\n  Mix            pile 70% = .*; web 30% = ", output), output[-3000:]
    assert re.search(r"\n    web          [\d,]+ sequences \([\d.]+ epochs\) trained; whole split loss [\d.]+", output)


def test_corrupt_corpus_takes_the_failure_path(tmp_path: Path):
    runs = tmp_path / "corrupt-runs"
    corpus = runs / "s3" / "local-bucketsraw" / "corrupt"
    corpus.mkdir(parents=True)
    (corpus / "00.jsonl").write_text('{"no text": 1}\nnot json at all\n{"text": ""}\n')
    (corpus / "01.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd truncated")  # a zstd header, then nothing usable
    given = {**TINY, "corpus": {**TINY["corpus"], "s3_uri": "s3://local-bucketsraw/corrupt/"}, "deploy": False}
    code, output = finish(local_run(runs, "corrupt", given, tmp_path))
    assert code == 1
    assert "✗" in output and "→ TrainTokenizer: caught, going to NotifyFailure" in output
    assert "GPT pre-training failed" in (runs / "executions" / "corrupt" / "notifications.log").read_text()
    assert result(runs, "corrupt")["status"] == "FAILED"


def test_bad_input_fails_in_plan_with_the_field_named(runs: Path, tmp_path: Path):
    code, output = finish(local_run(runs, "bad", {"training": {"instance_count": 0}}, tmp_path))
    assert code == 1
    assert "→ Plan: caught, going to ReadPlanError" in output and "✓ Plan" not in output
    notification = (runs / "executions" / "bad" / "notifications.log").read_text()
    assert (
        "Error: InputError. Cause: training.instance_count: 0 is not valid; expected a positive integer" in notification
    )
    assert "stackTrace" not in notification


def descendants(pid: int) -> list[int]:
    """Every process started, directly or not, by ``pid``, whatever session each is in (``ps``: Linux and macOS)."""
    table = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "ppid="], capture_output=True, text=True, check=True)
    parents = {int(child): int(parent) for child, parent in (line.split() for line in table.stdout.splitlines())}
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


@pytest.mark.timeout(3000)  # two runs: up to 600 s to the first checkpoint, then 900 s
def test_stopped_run_resumes_from_its_checkpoint(runs: Path, tmp_path: Path):
    longer = {
        **TINY,
        "deploy": False,
        "run_name": "resumable",
        "training": {**TINY["training"], "train_tokens": 2048 * 60},
    }
    checkpoints = runs / "s3" / "local-bucketscheckpoints" / "resumable"
    first = local_run(runs, "first", longer, tmp_path, start_new_session=True)
    deadline = time.time() + 600
    # A checkpoint's files: the folder also holds XLA's compilation cache (training/run/compile_cache.py) from step 1
    while not any(checkpoints.glob("ckpt-*")) and time.time() < deadline and first.poll() is None:
        time.sleep(0.5)
    time.sleep(2)  # let the checkpoint's files finish
    for pid in [first.pid, *descendants(first.pid)]:  # the machine goes away mid-training: every process of it
        with contextlib.suppress(ProcessLookupError):  # (each job host runs in a session of its own)
            os.kill(pid, signal.SIGKILL)
    first.communicate()
    assert any(checkpoints.glob("ckpt-*")), "no checkpoint was written before the stop"

    # Answered with only the members each API model requires: no state may depend on an optional one.
    code, output = finish(local_run(runs, "second", longer, tmp_path, "--only-required-members"))
    assert code == 0, output[-3000:]
    assert "Final metrics: []. Training time: unknown s (billed unknown s)" in output
    config = next(line for line in output.splitlines() if "[config]" in line)
    start_step = int(config.split("start_step=")[1].split()[0])
    assert start_step >= 10  # resumed, not started over
    steps = [int(line.split("step=")[1].split()[0]) for line in output.splitlines() if "[train] step=" in line]
    assert steps[0] > start_step and steps[-1] == 60
