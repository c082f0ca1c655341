"""The DataSync task, run here: the template's S3 source location copied into the folder that stands in for EFS."""

from __future__ import annotations

import fnmatch
import shutil
import uuid
from pathlib import Path
from typing import Any

from local.folder_store import FolderStore
from local.service_errors import ServiceError
from local.stack import LocalStack


def _task(stack: LocalStack, task_arn: str) -> dict[str, Any]:
    for logical_id, resource in stack.template["Resources"].items():
        if resource["Type"] == "AWS::DataSync::Task" and stack.local_name(logical_id, "TaskArn") == task_arn:
            return resource["Properties"]
    raise ValueError(f"no DataSync task {task_arn} in the template")


def _resource(stack: LocalStack, reference: dict) -> dict[str, Any]:
    """The resource a ``Ref``, ``Fn::GetAtt`` or an ARN built with ``Fn::Join`` around a ``Ref`` points at."""
    if "Fn::GetAtt" in reference:
        return stack.template["Resources"][reference["Fn::GetAtt"][0]]["Properties"]
    if "Ref" in reference:
        return stack.template["Resources"][reference["Ref"]]["Properties"]
    refs = [part for part in reference["Fn::Join"][1] if isinstance(part, dict)]
    return _resource(stack, refs[0])


def start_task_execution(stack: LocalStack, store: FolderStore, efs_root: Path, parameters: dict) -> dict:
    """Copies what the task's include filters select; answers like StartTaskExecution."""
    task = _task(stack, parameters["TaskArn"])
    source = _resource(stack, task["SourceLocationArn"])
    bucket = stack.local_name(source["S3BucketArn"]["Fn::GetAtt"][0])
    subdirectory = source.get("Subdirectory", "/").strip("/")
    destination = _resource(stack, task["DestinationLocationArn"])
    root = _resource(stack, destination["AccessPointArn"])["RootDirectory"]["Path"]
    target = efs_root / root.strip("/")
    patterns = [f["Value"] for f in parameters.get("Includes", [])]
    prefix = f"s3://{bucket}/{subdirectory}/" if subdirectory else f"s3://{bucket}/"
    copied = 0
    for uri, _ in store.list(prefix):
        relative = "/" + uri[len(prefix) :]
        if patterns and not any(fnmatch.fnmatchcase(relative, p) for p in patterns):
            continue
        path = target / relative.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(store.path(uri), path)
        copied += 1
    execution = f"{parameters['TaskArn']}/execution/exec-{uuid.uuid4().hex[:17]}"
    (efs_root / ".datasync").mkdir(parents=True, exist_ok=True)
    (efs_root / ".datasync" / execution.rsplit("/", 1)[-1]).write_text(str(copied))
    return {"TaskExecutionArn": execution}


def describe_task_execution(efs_root: Path, parameters: dict) -> dict:
    """The copy above finished before it returned: SUCCESS, with the number of files."""
    marker = efs_root / ".datasync" / parameters["TaskExecutionArn"].rsplit("/", 1)[-1]
    if not marker.is_file():  # DataSync's answer for an execution it does not know
        raise ServiceError("InvalidRequestException", f"{parameters['TaskExecutionArn']} does not exist")
    return {"Status": "SUCCESS", "Result": {"FilesTransferred": int(marker.read_text())}}
