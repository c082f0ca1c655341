"""SageMaker hosting, run here: CreateModel, CreateEndpointConfig, CreateEndpoint, UpdateEndpoint, DescribeEndpoint,
DescribeEndpointConfig, DeleteEndpointConfig and DeleteModel.

The folder (``runs/hosting``) outlives an execution, as the stage's endpoint outlives one in AWS: the first
deploying run creates the endpoint, a later one updates it. The model archive is unpacked as the serving container
would; the endpoint (``local.endpoint``: the archive's own code/inference.py hooks around its SavedModel, as in the
TF Serving container) answers one text-generation request with its model; DescribeEndpoint reports InService with
the reply when it succeeded, Failed otherwise. An update whose model fails leaves the endpoint serving the old
configuration, InService with the FailureReason, as SageMaker rolls a failed update back.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from infra.archives import extract
from local.folder_store import FolderStore
from local.jobs.common import REPO_ROOT
from local.service_errors import ServiceError

PROMPT = "def main("
REQUEST = {"inputs": PROMPT, "parameters": {"max_new_tokens": 32}}
ARN = "arn:aws:sagemaker:local:000000000000"


def create_model(request: dict, store: FolderStore, hosting_dir: Path) -> dict:
    archive = store.path(request["PrimaryContainer"]["ModelDataUrl"])
    if not archive.is_file():
        raise ServiceError("ValidationException", f"{request['PrimaryContainer']['ModelDataUrl']} does not exist")
    extract(archive, hosting_dir / "models" / request["ModelName"])
    return {"ModelArn": f"{ARN}:model/{request['ModelName']}"}


def create_endpoint_config(request: dict, hosting_dir: Path) -> dict:
    path = _config_path(hosting_dir, request["EndpointConfigName"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(request))
    return {"EndpointConfigArn": f"{ARN}:endpoint-config/{request['EndpointConfigName']}"}


def create_endpoint(request: dict, hosting_dir: Path) -> dict:
    name = request["EndpointName"]
    if _endpoint_path(hosting_dir, name).is_file():
        raise ServiceError("ValidationException", f'Cannot create already existing endpoint "{name}".')
    served = _serve(hosting_dir, request["EndpointConfigName"])
    status = {"EndpointName": name, "EndpointConfigName": request["EndpointConfigName"], **served}
    _write_endpoint(hosting_dir, name, status)
    return {"EndpointArn": f"{ARN}:endpoint/{name}"}


def update_endpoint(request: dict, hosting_dir: Path) -> dict:
    """The new configuration's model serves if it answers; else the old one goes on serving (a rollback)."""
    current = describe_endpoint({"EndpointName": request["EndpointName"]}, hosting_dir)
    if current["EndpointStatus"] != "InService":
        raise ServiceError("ValidationException", f'Cannot update in-progress endpoint "{request["EndpointName"]}".')
    served = _serve(hosting_dir, request["EndpointConfigName"])
    if served["EndpointStatus"] == "InService":
        status = {**current, **served, "EndpointConfigName": request["EndpointConfigName"]}
        status.pop("FailureReason", None)
    else:  # rolled back: the old configuration, still in service, and why the new one is not
        status = {**current, "FailureReason": served["FailureReason"]}
    _write_endpoint(hosting_dir, request["EndpointName"], status)
    return {"EndpointArn": f"{ARN}:endpoint/{request['EndpointName']}"}


def describe_endpoint(parameters: dict, hosting_dir: Path) -> dict:
    path = _endpoint_path(hosting_dir, parameters["EndpointName"])
    if not path.is_file():  # SageMaker's answer for an endpoint that does not exist (or no longer does)
        raise ServiceError("ValidationException", f'Could not find endpoint "{parameters["EndpointName"]}".')
    return json.loads(path.read_text())


def describe_endpoint_config(parameters: dict, hosting_dir: Path) -> dict:
    name = parameters["EndpointConfigName"]
    path = _config_path(hosting_dir, name)
    if not path.is_file():
        raise ServiceError("ValidationException", f'Could not find endpoint configuration "{name}".')
    config = json.loads(path.read_text())
    return {**config, "EndpointConfigArn": f"{ARN}:endpoint-config/{name}", "CreationTime": path.stat().st_mtime}


def delete_endpoint_config(parameters: dict, hosting_dir: Path) -> dict:
    describe_endpoint_config(parameters, hosting_dir)  # its error when there is none
    _config_path(hosting_dir, parameters["EndpointConfigName"]).unlink()
    return {}


def delete_model(parameters: dict, hosting_dir: Path) -> dict:
    folder = hosting_dir / "models" / parameters["ModelName"]
    if not folder.is_dir():
        raise ServiceError("ValidationException", f'Could not find model "{parameters["ModelName"]}".')
    shutil.rmtree(folder)
    return {}


def _serve(hosting_dir: Path, config_name: str) -> dict[str, Any]:
    """Starts the configuration's model and sends it the request: InService with the reply, or Failed and why."""
    config = describe_endpoint_config({"EndpointConfigName": config_name}, hosting_dir)
    model_dir = hosting_dir / "models" / config["ProductionVariants"][0]["ModelName"]
    result = subprocess.run(
        [sys.executable, "-m", "local.endpoint", str(model_dir), json.dumps(REQUEST)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    if result.returncode == 0:
        reply = json.loads(result.stdout.strip().splitlines()[-1])
        return {"EndpointStatus": "InService", "Response": json.loads(reply["Body"]), "Prompt": PROMPT}
    return {"EndpointStatus": "Failed", "FailureReason": result.stderr.strip().splitlines()[-1][:1000]}


def _config_path(hosting_dir: Path, name: str) -> Path:
    return hosting_dir / "endpoint-configs" / f"{name}.json"


def _endpoint_path(hosting_dir: Path, name: str) -> Path:
    return hosting_dir / "endpoints" / f"{name}.json"


def _write_endpoint(hosting_dir: Path, name: str, status: dict[str, Any]) -> None:
    path = _endpoint_path(hosting_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(status))
