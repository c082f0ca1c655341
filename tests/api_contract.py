"""What a request must satisfy before AWS sees it, checked against references the project did not write.

- botocore's own validator (``ParamValidator``) on the operation's input shape: names, types, required members;
- every other limit the service model states (that validator checks none of ``enum``, ``pattern``, ``max``):
  enum values, patterns, lengths, counts and numbers between ``min`` and ``max`` (:data:`CHECKED_KEYS`);
- the API reference's rules the model cannot express (:func:`documented_rules`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import botocore.session
import regex  # the service models write Java patterns (\p{L}, \p{Alnum}); the standard re lacks them
from botocore.model import OperationModel, Shape
from botocore.validate import ParamValidator
from sagemaker.core.common_utils import instance_supports_kms

SESSION = botocore.session.get_session()
# Each request the Plan step builds, and the SageMaker operation it is sent to.
REQUEST_OPERATIONS = {
    "tokenizer": "CreateProcessingJob",
    "shards": "CreateProcessingJob",
    "training": "CreateTrainingJob",
    "model": "CreateModel",
    "endpoint_config": "CreateEndpointConfig",
    "endpoint": "CreateEndpoint",
    "endpoint_update": "UpdateEndpoint",
}


def operation(service: str, name: str) -> OperationModel:
    return SESSION.get_service_model(service).operation_model(name)


def validate(service: str, name: str, request: dict[str, Any]) -> list[str]:
    """Every finding of botocore's validator and of the model's limits, as readable lines."""
    model = operation(service, name)
    report = ParamValidator().validate(request, model.input_shape)
    found = [report.generate_report()] if report.has_errors() else []
    return found + list(_limits(request, model.input_shape, name))


# What a service model's shapes may carry beyond their type and members. The limits on a value: botocore's
# validator checks ``required``, ``union``, ``jsonvalue`` and (not for maps) ``min``; :func:`_limits` checks
# ``enum``, ``pattern``, ``min`` and ``max`` everywhere. The rest say how a value is sent or documented.
CHECKED_KEYS = {"required", "union", "jsonvalue", "enum", "pattern", "min", "max"}
UNCONSTRAINING_KEYS = {
    *("type", "members", "member", "key", "value", "shape", "documentation", "deprecated", "deprecatedMessage"),
    *("box", "sensitive", "idempotencyToken", "exception", "error", "fault"),  # optional, redacted, filled in
    *("location", "locationName", "payload", "streaming", "event", "eventstream", "eventpayload"),  # wire format
}
SIZED = {"string": "characters", "blob": "bytes", "list": "items", "map": "entries"}


def _limits(value: Any, shape: Shape, path: str) -> Iterator[str]:
    """``enum`` and ``pattern`` of strings; ``min`` and ``max`` of lengths, counts and numbers; recursively."""
    limits = shape.metadata
    if shape.type_name in SIZED and isinstance(value, str | bytes | list | dict):
        size, unit = len(value), SIZED[shape.type_name]
        if size < limits.get("min", size):
            yield f"{path}: {size} {unit}, at least {limits['min']}"
        if size > limits.get("max", size):
            yield f"{path}: {size} {unit}, at most {limits['max']}"
    elif shape.type_name in ("integer", "long", "float", "double") and type(value) in (int, float):
        if value < limits.get("min", value):
            yield f"{path}: {value} is below {limits['min']}"
        if value > limits.get("max", value):
            yield f"{path}: {value} is above {limits['max']}"
    if shape.type_name == "structure" and isinstance(value, dict):
        for key, member in value.items():
            if key in shape.members:
                yield from _limits(member, shape.members[key], f"{path}.{key}")
    elif shape.type_name == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _limits(item, shape.member, f"{path}[{i}]")
    elif shape.type_name == "map" and isinstance(value, dict):
        for key, item in value.items():
            yield from _limits(key, shape.key, f"{path} key {key!r}")
            yield from _limits(item, shape.value, f"{path}[{key!r}]")
    elif shape.type_name == "string" and isinstance(value, str):
        if "enum" in limits and value not in limits["enum"]:
            yield f"{path}: {value!r} is not one of {shape.name}'s {len(limits['enum'])} values"
        if "pattern" in limits and not regex.fullmatch(limits["pattern"], value):
            yield f"{path}: {value[:80]!r} does not match {limits['pattern']}"


def documented_rules(kind: str, request: dict[str, Any]) -> list[str]:
    """The API reference's rules that the service model cannot express."""
    found = []
    volume_types = []
    if kind in ("tokenizer", "shards"):
        volume_types.append(("ClusterConfig", request["ProcessingResources"]["ClusterConfig"], "VolumeKmsKeyId"))
    if kind == "endpoint_config":
        types = [v["InstanceType"] for v in request["ProductionVariants"]]
        if "KmsKeyId" in request and not all(instance_supports_kms(t) for t in types):
            found.append(f"KmsKeyId with local-storage instances {types}")
    if kind == "training":
        volume_types.append(("ResourceConfig", request["ResourceConfig"], "VolumeKmsKeyId"))
        found += _training_rules(request)
    for where, config, field in volume_types:
        if field in config and not instance_supports_kms(config["InstanceType"]):
            found.append(f"{where}.{field} on {config['InstanceType']}, which has local storage")
    return found


def _training_rules(request: dict[str, Any]) -> list[str]:
    found = []
    stopping = request["StoppingCondition"]
    if request.get("EnableManagedSpotTraining"):
        if stopping.get("MaxWaitTimeInSeconds", 0) < stopping["MaxRuntimeInSeconds"]:
            found.append("spot: MaxWaitTimeInSeconds must be at least MaxRuntimeInSeconds")
        if "CheckpointConfig" not in request:
            found.append("spot without CheckpointConfig: a reclaimed job restarts from nothing")
    elif "MaxWaitTimeInSeconds" in stopping:
        found.append("MaxWaitTimeInSeconds is only for managed spot training")
    for channel in request["InputDataConfig"]:
        if "FileSystemDataSource" in channel["DataSource"]:
            if channel.get("InputMode", request["AlgorithmSpecification"]["TrainingInputMode"]) != "File":
                found.append(f"EFS channel {channel['ChannelName']} must use File input mode")
            vpc = request.get("VpcConfig") or {}
            if not (1 <= len(vpc.get("Subnets", [])) <= 16 and 1 <= len(vpc.get("SecurityGroupIds", [])) <= 5):
                found.append("EFS channel needs VpcConfig with 1-16 subnets and 1-5 security groups")
    hyperparameters = request.get("HyperParameters", {})
    if len(hyperparameters) > 100:
        found.append(f"{len(hyperparameters)} hyperparameters, at most 100")
    for key, value in hyperparameters.items():
        if len(key) > 256 or len(value) > 2500:
            found.append(f"hyperparameter {key[:40]!r}: key at most 256 characters, value at most 2,500")
    return found


# A Task state's resource -> (service, operation) of the call its Parameters are sent to.
INTEGRATIONS = {
    "arn:aws:states:::sns:publish": ("sns", "Publish"),
}


def task_operation(resource: str) -> tuple[str, str] | None:
    """``arn:aws:states:::aws-sdk:datasync:startTaskExecution`` -> ``("datasync", "StartTaskExecution")``; None for
    a Lambda function's own ARN (invoked directly, its Parameters are the function's payload)."""
    if not resource.startswith("arn:aws:states:::"):
        return None
    if resource in INTEGRATIONS:
        return INTEGRATIONS[resource]
    if resource.startswith("arn:aws:states:::aws-sdk:"):
        service, action = resource.removeprefix("arn:aws:states:::aws-sdk:").split(":")
        return service, action[0].upper() + action[1:]
    if resource.startswith("arn:aws:states:::sagemaker:"):
        action = resource.removeprefix("arn:aws:states:::sagemaker:").removesuffix(".sync")
        return "sagemaker", action[0].upper() + action[1:]
    raise KeyError(resource)


def static_parameter_keys(parameters: dict[str, Any]) -> set[str]:
    """A Parameters block's top-level keys as the operation sees them (``Name.$`` is the member ``Name``)."""
    return {key.removesuffix(".$") for key in parameters}


# What each call needs of its caller's role (Step Functions' IAM for the integrations, the API permissions
# reference); ``kms:CreateGrant`` because the endpoint configuration may name the data key.
STATE_MACHINE_NEEDS = {
    "sagemaker:createProcessingJob.sync": [
        "sagemaker:CreateProcessingJob",
        "sagemaker:DescribeProcessingJob",
        "sagemaker:StopProcessingJob",
        "sagemaker:AddTags",
        "iam:PassRole",
        "events:PutTargets",
        "events:PutRule",
        "events:DescribeRule",
    ],
    "sagemaker:createTrainingJob.sync": [
        "sagemaker:CreateTrainingJob",
        "sagemaker:DescribeTrainingJob",
        "sagemaker:StopTrainingJob",
        "sagemaker:AddTags",
        "iam:PassRole",
        "events:PutTargets",
        "events:PutRule",
        "events:DescribeRule",
    ],
    "sagemaker:createModel": ["sagemaker:CreateModel", "sagemaker:AddTags", "iam:PassRole"],
    "sagemaker:createEndpointConfig": ["sagemaker:CreateEndpointConfig", "sagemaker:AddTags"],
    "sagemaker:createEndpoint": ["sagemaker:CreateEndpoint", "sagemaker:AddTags", "kms:CreateGrant"],
    # UpdateEndpoint (Step Functions' IAM page for SageMaker): the endpoint's new configuration names the data key.
    "sagemaker:updateEndpoint": ["sagemaker:UpdateEndpoint", "kms:CreateGrant"],
    "aws-sdk:sagemaker:describeEndpoint": ["sagemaker:DescribeEndpoint"],
    "aws-sdk:sagemaker:describeEndpointConfig": ["sagemaker:DescribeEndpointConfig"],
    "aws-sdk:sagemaker:deleteEndpointConfig": ["sagemaker:DeleteEndpointConfig"],
    "aws-sdk:sagemaker:deleteModel": ["sagemaker:DeleteModel"],
    "aws-sdk:datasync:startTaskExecution": ["datasync:StartTaskExecution"],
    "aws-sdk:datasync:describeTaskExecution": ["datasync:DescribeTaskExecution"],
    "sns:publish": ["sns:Publish"],
}
