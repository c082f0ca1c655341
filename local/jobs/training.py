"""CreateTrainingJob, run here the way the SageMaker training toolkit runs a script-mode job.

Per host ``algo-N``: an ``/opt/ml``-style folder with ``input/data/<channel>``, ``model``, ``output`` and
``checkpoints``; the SM_* environment; TF_CONFIG when MultiWorkerMirroredStrategy is on; the entry point
started from the unpacked ``sourcedir.tar.gz`` with the hyperparameters as ``--name value`` arguments.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from infra.workflow.object_store import FolderStore
from local.jobs.common import (
    Host,
    JobFailed,
    copy_objects,
    extract_archive,
    in_host,
    local_environment,
    objects_under,
    run_hosts,
    upload_folder,
)


def decode_hyperparameters(encoded: dict[str, str]) -> dict[str, Any]:
    """As the toolkit does: each value JSON-decoded, the raw string kept when it is not JSON."""
    decoded = {}
    for name, value in encoded.items():
        try:
            decoded[name] = json.loads(value)
        except ValueError:
            decoded[name] = value
    return decoded


def to_cmd_args(hyperparameters: dict[str, Any]) -> list[str]:
    """The toolkit's command line: ``--name value`` for each user hyperparameter, booleans as True/False."""
    argv = []
    for name, value in sorted(hyperparameters.items()):
        if not name.startswith("sagemaker_"):
            argv += [f"--{name}", json.dumps(value) if isinstance(value, dict | list) else str(value)]
    return argv


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _channel(store: FolderStore, channel: dict, efs_root: Path, job_dir: Path) -> Path:
    """The channel's folder: an EFS directory is linked (a mount), an S3 prefix is copied once per job."""
    source = channel["DataSource"]
    if "FileSystemDataSource" in source:
        directory = efs_root / source["FileSystemDataSource"]["DirectoryPath"].lstrip("/")
        if not directory.is_dir():
            raise JobFailed(
                f"ClientError: the file system has no directory {source['FileSystemDataSource']['DirectoryPath']}"
            )
        return directory
    copy = job_dir / "s3-channels" / channel["ChannelName"]
    if not copy.exists():
        copy_objects(store, objects_under(store, source["S3DataSource"]["S3Uri"]), copy)
    return copy


def _link(target: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target, target_is_directory=True)


def run_training_job(request: dict[str, Any], store: FolderStore, jobs_dir: Path, efs_root: Path) -> dict[str, Any]:
    """Runs the job to completion and answers like DescribeTrainingJob; raises JobFailed."""
    name = request["TrainingJobName"]
    job_dir = jobs_dir / name
    started = time.time()
    hps = decode_hyperparameters(request.get("HyperParameters", {}))
    code_dir = job_dir / "code"
    submit = store.path(hps["sagemaker_submit_directory"])
    if not submit.is_file():
        raise JobFailed(f"ClientError: {hps['sagemaker_submit_directory']} does not exist")
    extract_archive(submit, code_dir)

    count = request["ResourceConfig"]["InstanceCount"]
    host_names = [f"algo-{i + 1}" for i in range(count)]
    mwms = bool(hps.get("sagemaker_multi_worker_mirrored_strategy_enabled")) and count > 1
    ports = free_ports(count) if mwms else []
    checkpoint = request.get("CheckpointConfig")
    checkpoint_store = store.path(checkpoint["S3Uri"]) if checkpoint else None
    if checkpoint_store:
        checkpoint_store.mkdir(parents=True, exist_ok=True)
    threads = max(1, (os.cpu_count() or 1) // count)
    hosts = []
    for index, host_name in enumerate(host_names):
        host_dir = job_dir / host_name
        channels = {}
        for channel in request.get("InputDataConfig", []):
            target = _channel(store, channel, efs_root, job_dir)
            _link(target, host_dir / "input/data" / channel["ChannelName"])
            channels[channel["ChannelName"]] = str(host_dir / "input/data" / channel["ChannelName"])
        for folder in ("model", "output/data"):
            (host_dir / folder).mkdir(parents=True, exist_ok=True)
        if checkpoint_store:  # SageMaker keeps /opt/ml/checkpoints in sync with S3; a link is that, instantly
            _link(checkpoint_store, Path(in_host(checkpoint.get("LocalPath", "/opt/ml/checkpoints"), host_dir)))
        user_hps = {k: in_host(v, host_dir) if isinstance(v, str) else v for k, v in hps.items()}
        env = {
            "SM_HPS": json.dumps({k: v for k, v in user_hps.items() if not k.startswith("sagemaker_")}),
            "SM_HOSTS": json.dumps(host_names),
            "SM_CURRENT_HOST": host_name,
            "SM_NUM_GPUS": "0",
            "SM_NUM_CPUS": str(threads),
            "SM_MODEL_DIR": str(host_dir / "model"),
            "SM_OUTPUT_DIR": str(host_dir / "output"),
            "SM_OUTPUT_DATA_DIR": str(host_dir / "output/data"),
            "SM_CHANNELS": json.dumps(sorted(channels)),
            "SM_USER_ENTRY_POINT": hps["sagemaker_program"],
            **{f"SM_CHANNEL_{c.upper()}": path for c, path in channels.items()},
            "CUDA_VISIBLE_DEVICES": "",
            "TF_NUM_INTRAOP_THREADS": str(threads),
            "TF_NUM_INTEROP_THREADS": "1",
            **request.get("Environment", {}),
        }
        if mwms:
            env["TF_CONFIG"] = json.dumps(
                {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker", "index": index}}
            )
        argv = [sys.executable, hps["sagemaker_program"], *to_cmd_args(user_hps)]
        hosts.append(Host(host_name, argv, local_environment(env), code_dir))

    codes = run_hosts(hosts, job_dir / "logs")
    if any(codes.values()):
        raise JobFailed(_failure_reason(name, hosts, codes, job_dir))
    artifact = _upload_model(store, request, name, job_dir / host_names[0] / "model")
    tensorboard = request.get("TensorBoardOutputConfig")
    if tensorboard:  # SageMaker uploads this folder while the job runs; here once, at the end
        local = Path(in_host(tensorboard.get("LocalPath", "/opt/ml/output/tensorboard"), job_dir / host_names[0]))
        if local.is_dir():
            upload_folder(store, local, tensorboard["S3OutputPath"])
    return {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:local:000000000000:training-job/{name}",
        "TrainingJobStatus": "Completed",
        "ModelArtifacts": {"S3ModelArtifacts": artifact},
        "FinalMetricDataList": final_metrics(
            request["AlgorithmSpecification"].get("MetricDefinitions", []), hosts[0].lines
        ),
        "TrainingTimeInSeconds": round(time.time() - started),
        "BillableTimeInSeconds": round(time.time() - started) * count,
    }


def _failure_reason(name: str, hosts: list[Host], codes: dict[str, int], job_dir: Path) -> str:
    for host in hosts:
        failure = job_dir / host.name / "output" / "failure"
        if failure.is_file() and failure.read_text().strip():
            return f"AlgorithmError: {failure.read_text().strip()} ({host.name})"
    host = next(h for h in hosts if codes[h.name])
    tail = "".join(host.lines[-5:]).strip()
    return f"AlgorithmError: exit code {codes[host.name]} on {host.name}: {tail}"


def _upload_model(store: FolderStore, request: dict, name: str, model_dir: Path) -> str:
    """model.tar.gz of the chief's /opt/ml/model, where SageMaker puts it."""
    uri = f"{request['OutputDataConfig']['S3OutputPath'].rstrip('/')}/{name}/output/model.tar.gz"
    archive = store.path(uri)
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(model_dir.rglob("*")):
            tar.add(path, arcname=path.relative_to(model_dir).as_posix(), recursive=False)
    return uri


def final_metrics(definitions: list[dict[str, str]], lines: list[str]) -> list[dict[str, Any]]:
    """The last value of each metric definition in the chief's log, as FinalMetricDataList."""
    last: dict[str, float] = {}
    for line in lines:
        for definition in definitions:
            match = re.search(definition["Regex"], line)
            if match:
                last[definition["Name"]] = float(match.group(1))
    return [{"MetricName": name, "Value": value} for name, value in last.items()]
