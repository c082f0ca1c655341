"""CreateTrainingJob, run here as SageMaker runs it: the control plane's part here, the container's by the toolkit.

What SageMaker does, done here per host ``algo-N``: the ``/opt/ml`` layout (a folder, ``SAGEMAKER_BASE_DIR``) with
``input/config/{hyperparameters,resourceconfig,inputdataconfig}.json``, the channels under ``input/data/``, the
``model``, ``output`` and checkpoint folders, checkpoint sync, namespaces per host (``local/jobs/namespaces.py``),
``model.tar.gz`` and the failure reason. What the container does is the real in-container toolkit's:
``sagemaker-training``'s ``train`` entry point with the TensorFlow container's module
(``sagemaker_tensorflow_container.training``), which installs the package, writes TF_CONFIG and starts the entry
point. Two translations remain, as the machine has no ``/opt/ml`` and no S3: container paths in hyperparameters
name the host's folder, and ``sagemaker_submit_directory`` names the archive in the local store.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tarfile
import time
from pathlib import Path
from typing import Any

from infra.plan_step.container import IMAGE_ENTRYPOINT
from local.folder_store import FolderStore
from local.jobs import namespaces
from local.jobs.common import (
    Host,
    JobFailed,
    container_command,
    copy_objects,
    in_host,
    local_environment,
    objects_under,
    run_hosts,
    upload_folder,
)
from local.jobs.console import Echo

FRAMEWORK_MODULE = "sagemaker_tensorflow_container.training:main"
TRAIN_STEP = re.compile(r"\[train\] step=(\d+) ")


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


def host_hyperparameters(request: dict[str, Any], store: FolderStore, host_dir: Path) -> dict[str, str]:
    """The request's hyperparameters (JSON-encoded strings, as SageMaker writes them) with the two translations."""
    hps = {}
    for name, encoded in request.get("HyperParameters", {}).items():
        try:
            value = json.loads(encoded)
        except ValueError:
            value = encoded
        if name == "sagemaker_submit_directory":
            value = str(store.path(value))
        elif isinstance(value, str):
            value = in_host(value, host_dir)
        hps[name] = json.dumps(value) if isinstance(value, str) else encoded
    return hps


def write_host_config(
    host_dir: Path, request: dict[str, Any], hyperparameters: dict[str, str], hosts: list[str], host: str
) -> None:
    """``/opt/ml/input/config``: what SageMaker writes for the toolkit before the container starts."""
    config = host_dir / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    instance_type = request["ResourceConfig"]["InstanceType"]
    group = {"instance_group_name": "homogeneousCluster", "instance_type": instance_type, "hosts": hosts}
    resource = {
        "current_host": host,
        "current_instance_type": instance_type,
        "current_group_name": "homogeneousCluster",
        "hosts": hosts,
        "instance_groups": [group],
        "network_interface_name": "eth0",
    }
    mode = request["AlgorithmSpecification"].get("TrainingInputMode", "File")
    channels = {
        c["ChannelName"]: {
            "TrainingInputMode": c.get("InputMode", mode),
            "S3DistributionType": c["DataSource"]
            .get("S3DataSource", {})
            .get("S3DataDistributionType", "FullyReplicated"),
            "RecordWrapperType": "None",
        }
        for c in request.get("InputDataConfig", [])
    }
    for name, content in (
        ("hyperparameters", hyperparameters),
        ("resourceconfig", resource),
        ("inputdataconfig", channels),
    ):
        (config / f"{name}.json").write_text(json.dumps(content, indent=2))


def run_training_job(
    request: dict[str, Any],
    store: FolderStore,
    jobs_dir: Path,
    efs_root: Path,
    echo: Echo = "progress",
    interrupt_at_step: int = 0,
) -> dict[str, Any]:
    """Runs the job to completion and answers like DescribeTrainingJob; raises JobFailed.

    ``interrupt_at_step``: a spot job is interrupted at the chief's first ``[train]`` line at or past this step (SIGTERM
    to every host, SIGKILL 120 s later) and started again as managed spot does it: the same name and checkpoint URI,
    fresh instances whose /opt/ml/checkpoints comes from S3. The interrupted attempt's logs go to ``interrupted/``.
    """
    name = request["TrainingJobName"]
    job_dir = jobs_dir / name
    started = time.time()
    submit = json.loads(request.get("HyperParameters", {}).get("sagemaker_submit_directory", '""'))
    if not store.path(submit).is_file():
        raise JobFailed(f"ClientError: {submit} does not exist")
    count = request["ResourceConfig"]["InstanceCount"]
    host_names, fallback = [f"algo-{i + 1}" for i in range(count)], ""
    if namespaces.isolation()[0] is None:  # no network per host: one host, whose name resolves here
        host_names, fallback = ["localhost"], f" (the job's {count} hosts as one, on the same data)" * (count > 1)
    spot = bool(request.get("EnableManagedSpotTraining"))  # only a spot job is reclaimed and restarted
    billable = 0.0
    for at_step in [interrupt_at_step, 0] if spot and interrupt_at_step else [0]:
        began = time.time()
        hosts = _hosts(request, store, job_dir, efs_root, host_names)
        reached = functools.partial(_reached, hosts[0], at_step)
        codes = run_hosts(hosts, job_dir / "logs", echo, fallback=fallback, interrupt=reached)
        billable += time.time() - began
        if not reached():
            break
        shutil.rmtree(job_dir / "interrupted", ignore_errors=True)
        (job_dir / "logs").rename(job_dir / "interrupted")
        print(f"  spot interruption at step {at_step}: {name} starts again from its checkpoints", flush=True)
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
        "BillableTimeInSeconds": round(billable),  # per instance: the time the instances ran
    }


def _reached(chief: Host, step: int) -> bool:
    """Whether the chief has logged a ``[train]`` line at or past ``step`` (never, for step 0)."""
    return bool(step) and any(int(m[1]) >= step for m in map(TRAIN_STEP.match, chief.lines[-50:]) if m)


def _hosts(request: dict[str, Any], store: FolderStore, job_dir: Path, efs_root: Path, names: list[str]) -> list[Host]:
    """Fresh instances: each host's /opt/ml as SageMaker lays it out, and the container command it runs."""
    count = request["ResourceConfig"]["InstanceCount"]
    checkpoint = request.get("CheckpointConfig")
    checkpoint_store = store.path(checkpoint["S3Uri"]) if checkpoint else None
    if checkpoint_store:
        checkpoint_store.mkdir(parents=True, exist_ok=True)
    threads = max(1, (os.cpu_count() or 1) // count)
    spec = request["AlgorithmSpecification"]
    command = container_command(  # the image's ENTRYPOINT and SageMaker's argument, unless the request names its own
        spec.get("ContainerEntrypoint", IMAGE_ENTRYPOINT),
        spec.get("ContainerArguments", [] if "ContainerEntrypoint" in spec else ["train"]),
    )
    hosts = []
    for host_name in names:
        host_dir = job_dir / host_name
        shutil.rmtree(host_dir, ignore_errors=True)  # links inside are removed, not followed
        for channel in request.get("InputDataConfig", []):
            target = _channel(store, channel, efs_root, job_dir)
            _link(target, host_dir / "input/data" / channel["ChannelName"])
        for folder in ("model", "output/data"):  # SageMaker makes them; the toolkit does not
            (host_dir / folder).mkdir(parents=True, exist_ok=True)
        if checkpoint_store:  # SageMaker keeps /opt/ml/checkpoints in sync with S3; a link is that, instantly
            _link(checkpoint_store, Path(in_host(checkpoint.get("LocalPath", "/opt/ml/checkpoints"), host_dir)))
        hyperparameters = host_hyperparameters(request, store, host_dir)
        write_host_config(host_dir, request, hyperparameters, names, host_name)
        env = {
            "SAGEMAKER_BASE_DIR": str(host_dir),
            "SAGEMAKER_TRAINING_MODULE": FRAMEWORK_MODULE,
            "TRAINING_JOB_NAME": request["TrainingJobName"],
            "CUDA_VISIBLE_DEVICES": "",  # this machine's share: no GPU, its cores split between the hosts
            "TF_NUM_INTRAOP_THREADS": str(threads),
            "TF_NUM_INTEROP_THREADS": "1",
            **request.get("Environment", {}),
        }
        hosts.append(Host(host_name, command, local_environment(env), host_dir))
    return hosts


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
