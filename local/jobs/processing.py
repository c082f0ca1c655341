"""CreateProcessingJob, run here: inputs copied from the object store, the container's entry point run per host."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from local.folder_store import FolderStore
from local.jobs.common import (
    Host,
    JobFailed,
    container_command,
    copy_objects,
    in_host,
    local_environment,
    objects_in_manifest,
    objects_under,
    run_hosts,
    upload_folder,
)
from local.jobs.console import Echo


def _host_inputs(store: FolderStore, inputs: list[dict], index: int, count: int) -> list[tuple[str, list]]:
    """(LocalPath, objects) for one host; ShardedByS3Key gives each host every count-th object."""
    placed = []
    for item in inputs:
        s3 = item["S3Input"]
        if s3["S3DataType"] == "ManifestFile":
            objects = objects_in_manifest(store, s3["S3Uri"])
        else:
            objects = objects_under(store, s3["S3Uri"])
        if s3.get("S3DataDistributionType") == "ShardedByS3Key":
            objects = objects[index::count]
        placed.append((s3["LocalPath"], objects))
    return placed


def run_processing_job(
    request: dict[str, Any], store: FolderStore, jobs_dir: Path, echo: Echo = "progress"
) -> dict[str, Any]:
    """Runs the job to completion and answers like DescribeProcessingJob; raises JobFailed."""
    name = request["ProcessingJobName"]
    cluster = request["ProcessingResources"]["ClusterConfig"]
    count = cluster["InstanceCount"]
    app = request["AppSpecification"]
    job_dir = jobs_dir / name
    started = time.time()
    hosts = []
    for index in range(count):
        host_name = f"algo-{index + 1}"
        host_dir = job_dir / host_name
        for local_path, objects in _host_inputs(store, request.get("ProcessingInputs", []), index, count):
            copy_objects(store, objects, Path(in_host(local_path, host_dir)))
        for output in request["ProcessingOutputConfig"]["Outputs"]:
            Path(in_host(output["S3Output"]["LocalPath"], host_dir)).mkdir(parents=True, exist_ok=True)
        # The container's own entry point, its /opt/ml paths moved into this host's folder. The host name,
        # which SageMaker gives in /opt/ml/config/resourceconfig.json, is passed as an argument here.
        command = container_command(app["ContainerEntrypoint"], app.get("ContainerArguments", []))
        argv = [in_host(part, host_dir) for part in command]
        argv += ["--host", host_name]
        hosts.append(Host(host_name, argv, local_environment(request.get("Environment", {})), host_dir))
    codes = run_hosts(hosts, job_dir / "logs", echo)
    failed = {h: c for h, c in codes.items() if c}
    if failed:
        host = next(h for h in hosts if h.name in failed)
        reason = "".join(host.lines[-5:]).strip() or f"exit code {failed[host.name]}"
        raise JobFailed(f"ProcessingJob {name} failed on {host.name} (exit code {failed[host.name]}): {reason}")
    for host in hosts:
        for output in request["ProcessingOutputConfig"]["Outputs"]:
            upload_folder(store, Path(in_host(output["S3Output"]["LocalPath"], host.cwd)), output["S3Output"]["S3Uri"])
    return {
        "ProcessingJobName": name,
        "ProcessingJobArn": f"arn:aws:sagemaker:local:000000000000:processing-job/{name}",
        "ProcessingJobStatus": "Completed",
        "ProcessingResources": request["ProcessingResources"],
        "ProcessingOutputConfig": request["ProcessingOutputConfig"],
        "ProcessingStartTime": started,
        "ProcessingEndTime": time.time(),
    }
