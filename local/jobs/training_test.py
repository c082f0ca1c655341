"""What the local control plane writes for the in-container toolkit, read back by the toolkit's own code."""

import json
import re
import subprocess
import sys

import pytest

from infra.plan_step.container import training_container
from infra.plan_step.hyperparameters import encode
from infra.plan_step.metric_definitions import METRIC_DEFINITIONS
from local.folder_store import FolderStore
from local.jobs import namespaces
from local.jobs.training import final_metrics, host_hyperparameters, run_training_job, write_host_config
from local.summary import spot_interruption, training_log

REQUEST = {
    "HyperParameters": encode(
        {
            "model_preset": "tiny",
            "recompute": False,
            "learning_rate": 6e-4,
            "checkpoint_dir": "/opt/ml/checkpoints",
            "sagemaker_submit_directory": "s3://assets/abc.gz",
            "sagemaker_program": "train.py",
            "sagemaker_multi_worker_mirrored_strategy_enabled": True,
        }
    ),
    "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2},
    "AlgorithmSpecification": {"TrainingInputMode": "File"},
    "InputDataConfig": [{"ChannelName": "train", "DataSource": {"FileSystemDataSource": {}}, "InputMode": "File"}],
}

# Run in a fresh process: the toolkit reads SAGEMAKER_BASE_DIR when it is imported.
READ_BACK = """
import json
import re
from sagemaker_training import environment
env = environment.Environment()
print(json.dumps({"args": env.to_cmd_args(), "hosts": env.hosts, "current": env.current_host,
                  "channels": env.channel_input_dirs, "mwms": env.additional_framework_parameters,
                  "module_dir": env.module_dir, "model_dir": env.model_dir}))
"""


def test_the_toolkit_reads_the_job_as_sagemaker_configures_it(tmp_path):
    store = FolderStore(tmp_path / "s3")
    host_dir = tmp_path / "algo-2"
    hps = host_hyperparameters(REQUEST, store, host_dir)
    write_host_config(host_dir, REQUEST, hps, ["algo-1", "algo-2"], "algo-2")
    out = subprocess.run(
        [sys.executable, "-c", READ_BACK],
        env={"SAGEMAKER_BASE_DIR": str(host_dir), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["hosts"] == ["algo-1", "algo-2"] and seen["current"] == "algo-2"
    assert seen["channels"] == {"train": str(host_dir / "input/data/train")}
    assert seen["module_dir"] == str(store.path("s3://assets/abc.gz"))
    assert seen["model_dir"] == str(host_dir / "model")
    assert seen["mwms"]["sagemaker_multi_worker_mirrored_strategy_enabled"] is True
    args = seen["args"]  # the toolkit's command line: booleans as True/False, container paths translated
    assert args[args.index("--recompute") + 1] == "False"
    assert args[args.index("--checkpoint_dir") + 1] == str(host_dir / "checkpoints")
    assert args[args.index("--learning_rate") + 1] == "0.0006"


def test_final_metrics_are_the_last_values_in_the_log():
    lines = [
        "[train] step=10 loss=5.0 ppl=148.4 lr=1.0e-03 tokens_per_sec=100.0 mfu=0.0010",
        "noise",
        "[train] step=20 loss=4.0 ppl=54.6 lr=9.0e-04 tokens_per_sec=120.0 mfu=0.0012",
        "[valid] step=20 val_loss=4.5000 val_ppl=90.02",
    ]
    metrics = {m["MetricName"]: m["Value"] for m in final_metrics(METRIC_DEFINITIONS, lines)}
    assert metrics["train:loss"] == 4.0
    assert metrics["validation:perplexity"] == 90.02
    assert metrics["train:tokens_per_second"] == 120.0


# A training script as far as a spot interruption goes: resumes at the step in its checkpoint file, logs every step,
# and on SIGTERM finishes the step in flight, checkpoints it and exits 143 (what train.py does, in miniature).
TRAINER = """
import os, pathlib, signal, sys, time
checkpoint = pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"]) / "checkpoints" / "step"
start = int(checkpoint.read_text()) if checkpoint.exists() else 0
stopping = []
signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
print(f"[config] engine=fake start_step={start} max_steps=12 ", flush=True)
for step in range(start + 1, 13):
    time.sleep(0.05)
    print(f"[train] step={step} loss=1.0 ", flush=True)
    if stopping:
        checkpoint.write_text(str(step))
        print(f"[stopped] step={step} checkpointed 0.01 s after SIGTERM", flush=True)
        sys.exit(143)
"""


# What the toolkit's `train` does with the training script, as far as a stop goes: no SIGTERM handler, the script's
# output relayed through a pipe, its status passed on. The init must signal the script, not the relay.
RELAY = """
import subprocess, sys
script = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, text=True)
for line in script.stdout:
    print(line, end="", flush=True)
sys.exit(script.wait())
"""


def fake_job(tmp_path, count: int) -> tuple[dict, FolderStore]:
    """A spot training request whose container runs the init, RELAY and TRAINER, and its store."""
    store = FolderStore(tmp_path / "s3")
    store.path("s3://assets/code.tar.gz").parent.mkdir(parents=True)
    store.path("s3://assets/code.tar.gz").write_bytes(b"")
    for name, source in (("relay.py", RELAY), ("trainer.py", TRAINER)):
        (tmp_path / name).write_text(source)
    container = training_container(image_forwards_signals=False)
    command = [sys.executable, str(tmp_path / "relay.py"), sys.executable, str(tmp_path / "trainer.py")]
    request = {
        "TrainingJobName": "job",
        "AlgorithmSpecification": {**container, "ContainerArguments": command},
        "HyperParameters": {"sagemaker_submit_directory": '"s3://assets/code.tar.gz"'},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": count},
        "OutputDataConfig": {"S3OutputPath": "s3://models/training/"},
        "CheckpointConfig": {"S3Uri": "s3://checkpoints/run/", "LocalPath": "/opt/ml/checkpoints"},
        "EnableManagedSpotTraining": True,
    }
    return request, store


@pytest.mark.skipif(namespaces.isolation()[0] is None, reason=namespaces.isolation()[1])
def test_a_spot_interruption_restarts_the_job_from_its_checkpoint_losing_no_finished_step(tmp_path):
    request, store = fake_job(tmp_path, count=1)
    job = run_training_job(request, store, tmp_path / "jobs", tmp_path / "efs", echo="none", interrupt_at_step=4)
    assert job["TrainingJobStatus"] == "Completed"
    lines = training_log(tmp_path, "job")
    assert lines[-1].startswith("[train] step=12 ")
    note = spot_interruption(tmp_path, job, lines)  # the step it stops at depends on this machine's speed
    lost_none = r"interrupted after step (\d+), resumed at step \1: 0 steps lost; training \d+ s, billed"
    assert re.match(lost_none, note), note
    assert job["BillableTimeInSeconds"] <= job["TrainingTimeInSeconds"]  # both attempts, per instance


def test_without_namespaces_the_hosts_of_a_job_run_as_one_with_a_notice(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(namespaces, "isolation", lambda: (None, "no namespaces for this test"))
    request, store = fake_job(tmp_path, count=2)
    job = run_training_job(request, store, tmp_path / "jobs", tmp_path / "efs", echo="none")
    assert job["TrainingJobStatus"] == "Completed"
    assert training_log(tmp_path, "job")[-1].startswith("[train] step=12 ")
    assert [p.name for p in (tmp_path / "jobs" / "job" / "logs").iterdir()] == ["localhost.log"]
    (notice,) = capsys.readouterr().out.splitlines()
    assert notice == (
        "  note: no namespaces for this test, so hosts are plain processes here (the job's 2 hosts as one, on the "
        "same data), and a stop signals a host's processes, not its PID 1"
    )


def test_billable_time_is_per_instance_never_more_than_the_training_time(tmp_path, monkeypatch):
    """BillableTimeInSeconds is per instance (DescribeTrainingJob): a 3-host job is not billed 3 times over."""
    monkeypatch.setattr(namespaces, "isolation", lambda: (None, "no namespaces for this test"))
    request, store = fake_job(tmp_path, count=3)
    job = run_training_job(request, store, tmp_path / "jobs", tmp_path / "efs", echo="none")
    # TRAINER sleeps 12 x 50 ms, so the hosts ran 0.6 s or more: at least 1 s, rounded.
    billed, trained = job["BillableTimeInSeconds"], job["TrainingTimeInSeconds"]
    assert 1 <= billed <= trained, f"billed {billed} s per instance for {trained} s of training"
