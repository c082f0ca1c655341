"""Task handlers that only answer, as each service would on success: the definition runs through the real
interpreter (``local/run_state_machine.mjs``) in seconds, with no job, for the faults ``local.tasks`` injects.

    LOCAL_TASKS=tests.answering_tasks node local/run_state_machine.mjs ...
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from local import tasks

ENDPOINT, CONFIG, OLD_CONFIG = "gpt-dev-endpoint", "gpt-dev-faults-epc", "gpt-dev-earlier-epc"
# The Plan step's answer: every step runs (tokenizer, shards, staging, training, deployment).
PLAN = {
    "preprocess": {"run": True, "train_tokenizer": True, "dataset_ready": False},
    "stage_to_efs": True,
    "train": True,
    "trained_earlier": None,
    "deploy": True,
    "datasync_include": "/datasets/faults/*",
    "names": {"endpoint": ENDPOINT, "endpoint_config": CONFIG},
    "requests": {
        kind: {}
        for kind in ("tokenizer", "shards", "training", "model", "endpoint_config", "endpoint", "endpoint_update")
    },
    "checkpoint_uri": "s3://checkpoints/faults/",
    "training_report_uri": "s3://models/faults/report.html",
    "hf_checkpoint": "hf/ in s3://models/faults/model.tar.gz",
    "summary": {"modelled": "1.0 s per step (modelled)", "mix": "one source (no mix)", "files_unsupported": "none"},
}
# What each operation answers (its output shape; see local.tasks.TASKS for the resource that calls it).
ANSWERS = {
    "DescribeProcessingJob": {"ProcessingJobStatus": "Completed"},
    "DescribeTrainingJob": {
        "TrainingJobStatus": "Completed",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://models/faults/model.tar.gz"},
    },
    "CreateModel": {"ModelArn": "arn:aws:sagemaker:local:000000000000:model/m"},
    "CreateEndpointConfig": {"EndpointConfigArn": "arn:aws:sagemaker:local:000000000000:endpoint-config/c"},
    "CreateEndpoint": {"EndpointArn": f"arn:aws:sagemaker:local:000000000000:endpoint/{ENDPOINT}"},
    # The stage's endpoint exists and serves this execution's configuration once updated (FindEndpoint's answer too,
    # which then names the same configuration: the answers do not change with the calls).
    "DescribeEndpoint": {"EndpointName": ENDPOINT, "EndpointStatus": "InService", "EndpointConfigName": CONFIG},
    "UpdateEndpoint": {"EndpointArn": f"arn:aws:sagemaker:local:000000000000:endpoint/{ENDPOINT}"},
    "DescribeEndpointConfig": {
        "EndpointConfigName": OLD_CONFIG,
        "ProductionVariants": [{"VariantName": "AllTraffic", "ModelName": "gpt-dev-earlier-mdl"}],
    },
    "DeleteEndpointConfig": {},
    "DeleteModel": {},
    "StartTaskExecution": {"TaskExecutionArn": "arn:aws:datasync:local:0:task/t/execution/e"},
    "DescribeTaskExecution": {"Status": "SUCCESS"},
    "Publish": {"MessageId": "local"},
}


def answer(context: tasks.RunContext, resource: str, parameters: Any) -> Any:
    if not resource.startswith("arn:aws:states:::"):  # the Plan function
        return PLAN
    if resource == tasks.SNS_PUBLISH:
        tasks.publish(parameters, Path(context.execution_dir))
    return ANSWERS[tasks.TASKS[resource].operation]


if __name__ == "__main__":
    sys.exit(tasks.main(answer))
