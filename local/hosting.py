"""CreateModel, CreateEndpointConfig, CreateEndpoint and DescribeEndpoint, run here.

The model archive is unpacked as the serving container would; the endpoint (``local.endpoint``: the
archive's own code/inference.py hooks around its SavedModel, as in the TF Serving container) answers one
text-generation request; DescribeEndpoint reports InService with the reply when it succeeded, Failed otherwise.
"""

from __future__ import annotations

import json
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


def create_model(request: dict, store: FolderStore, hosting_dir: Path) -> dict:
    archive = store.path(request["PrimaryContainer"]["ModelDataUrl"])
    if not archive.is_file():
        raise ServiceError("ValidationException", f"{request['PrimaryContainer']['ModelDataUrl']} does not exist")
    extract(archive, hosting_dir / "models" / request["ModelName"])
    return {"ModelArn": f"arn:aws:sagemaker:local:000000000000:model/{request['ModelName']}"}


def create_endpoint_config(request: dict, hosting_dir: Path) -> dict:
    path = hosting_dir / "endpoint-configs" / f"{request['EndpointConfigName']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(request))
    return {
        "EndpointConfigArn": f"arn:aws:sagemaker:local:000000000000:endpoint-config/{request['EndpointConfigName']}"
    }


def create_endpoint(request: dict, hosting_dir: Path) -> dict:
    config = json.loads((hosting_dir / "endpoint-configs" / f"{request['EndpointConfigName']}.json").read_text())
    model_dir = hosting_dir / "models" / config["ProductionVariants"][0]["ModelName"]
    result = subprocess.run(
        [sys.executable, "-m", "local.endpoint", str(model_dir), json.dumps(REQUEST)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    status: dict[str, Any] = {"EndpointName": request["EndpointName"]}
    if result.returncode == 0:
        reply = json.loads(result.stdout.strip().splitlines()[-1])
        status.update(EndpointStatus="InService", Response=json.loads(reply["Body"]), Prompt=PROMPT)
    else:
        status.update(EndpointStatus="Failed", FailureReason=result.stderr.strip().splitlines()[-1][:1000])
    path = hosting_dir / "endpoints" / f"{request['EndpointName']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(status))
    return {"EndpointArn": f"arn:aws:sagemaker:local:000000000000:endpoint/{request['EndpointName']}"}


def describe_endpoint(parameters: dict, hosting_dir: Path) -> dict:
    path = hosting_dir / "endpoints" / f"{parameters['EndpointName']}.json"
    if not path.is_file():  # SageMaker's answer for an endpoint that does not exist (or no longer does)
        raise ServiceError("ValidationException", f'Could not find endpoint "{parameters["EndpointName"]}".')
    return json.loads(path.read_text())
