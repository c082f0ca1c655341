"""Task handlers for the endpoint's life over several executions: the Plan step's answer names this execution's
model and configuration, every job only answers, and hosting is the local run's own (``local/hosting.py``, its
folder outliving the execution), with a model that answers unless its archive says ``fails``.

    LOCAL_TASKS=tests.hosting_tasks node local/run_state_machine.mjs ...
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from infra.plan_step import requests
from infra.plan_step.names import resource_names
from local import hosting, tasks
from tests.answering_tasks import ANSWERS, PLAN

ARCHIVE = "s3://models/training/{}/output/model.tar.gz"


def plan(execution_name: str) -> dict[str, Any]:
    names = resource_names("gpt-dev", execution_name, "0ff11e00")
    model = {"ModelName": names["model"], "PrimaryContainer": {"ModelDataUrl": ARCHIVE.format(names["training"])}}
    config = {
        "EndpointConfigName": names["endpoint_config"],
        "ProductionVariants": [{"VariantName": "AllTraffic", "ModelName": names["model"]}],
    }
    return {
        **PLAN,
        "names": names,
        "requests": {
            **PLAN["requests"],
            "model": model,
            "endpoint_config": config,
            "endpoint": {"EndpointName": names["endpoint"], "EndpointConfigName": names["endpoint_config"]},
            "endpoint_update": requests.endpoint_update_request(names["endpoint"], names["endpoint_config"]),
        },
    }


def serve(hosting_dir: Path, config_name: str) -> dict[str, Any]:
    """The model answers, unless its archive held the word ``fails``."""
    config = hosting.describe_endpoint_config({"EndpointConfigName": config_name}, hosting_dir)
    model = hosting_dir / "models" / config["ProductionVariants"][0]["ModelName"]
    if "fails" in (model / "model.txt").read_text():
        return {"EndpointStatus": "Failed", "FailureReason": "the model did not load"}
    return {"EndpointStatus": "InService"}


def answer(context: tasks.RunContext, resource: str, parameters: Any) -> Any:
    if not resource.startswith("arn:aws:states:::"):  # the Plan function
        return plan(parameters["execution_name"])
    if resource == tasks.SNS_PUBLISH:
        tasks.publish(parameters, Path(context.execution_dir))
    if "Endpoint" in resource or "Model" in resource:  # hosting: the local run's
        stack, store = None, tasks.FolderStore(context.store)
        return tasks.TASKS[resource].run(tasks.Call(parameters, context, stack, store))
    return ANSWERS[tasks.TASKS[resource].operation]


if __name__ == "__main__":
    hosting._serve = serve  # the endpoint's model, stood in for: no SavedModel here
    sys.exit(tasks.main(answer))
