"""The names Step Functions gives a Task's errors, built from botocore's models: what Retry and Catch must name.

An AWS SDK integration (``arn:aws:states:::aws-sdk:datasync:startTaskExecution``) reports an error as
``ServiceName.ErrorName``: the service's exception prefix from the Step Functions guide's table ("AWS SDK service
integrations"), and the error's name in Pascal case, always with an ``Exception`` suffix (``S3.BucketAlreadyExists``
is ``S3.BucketAlreadyExistsException``). An error that the operation's model does not list (throttling, a
validation error, access denied: AWS's "common errors") arrives as the service's base exception of the Java SDK
v2: ``DataSync.DataSyncException``, ``SageMaker.SageMakerException``.

The optimized SageMaker integration (``arn:aws:states:::sagemaker:createTrainingJob.sync``) names errors after the
Java SDK v1: a modeled one as ``SageMaker.ResourceLimitExceededException``, any other, throttling included, as
``SageMaker.AmazonSageMakerException`` (the guide's SageMaker examples retry that name).
"""

from __future__ import annotations

import functools

import botocore.session

# Step Functions' exception prefix of each service this workflow calls (the guide's "Exception prefix" column).
EXCEPTION_PREFIX = {"datasync": "DataSync", "sagemaker": "SageMaker", "lambda": "Lambda", "sns": "SNS"}
# The Java SDK v1 base exception, which optimized integrations report for every error the model does not list.
V1_BASE_EXCEPTION = {
    "sagemaker": "AmazonSageMakerException",
    "lambda": "AWSLambdaException",
    "sns": "AmazonSNSException",
}


@functools.cache
def modeled_errors(service: str, operation: str) -> tuple[str, ...]:
    """The error shapes botocore's model lists for ``operation`` (``StartTaskExecution``), as named there."""
    model = botocore.session.get_session().get_service_model(service)
    return tuple(shape.name for shape in model.operation_model(operation).error_shapes)


def operation_name(action: str) -> str:
    """The API's name of a Task ARN's action: ``startTaskExecution`` -> ``StartTaskExecution``."""
    return action[0].upper() + action[1:]


def _suffixed(name: str) -> str:
    return name if name.endswith("Exception") else f"{name}Exception"


def sdk_error(service: str, operation: str, code: str) -> str:
    """The name an AWS SDK integration gives the error ``code`` of ``operation``: modeled, or the base exception."""
    prefix = EXCEPTION_PREFIX[service]
    if code in modeled_errors(service, operation):
        return f"{prefix}.{_suffixed(code)}"
    return f"{prefix}.{prefix}Exception"


def optimized_error(service: str, operation: str, code: str) -> str:
    """The name an optimized integration (``sagemaker:createModel``, ``lambda:invoke``) gives the error ``code``."""
    if code in modeled_errors(service, operation):
        return f"{EXCEPTION_PREFIX[service]}.{_suffixed(code)}"
    return f"{EXCEPTION_PREFIX[service]}.{V1_BASE_EXCEPTION[service]}"


def task_service(resource: str) -> tuple[bool, str, str]:
    """(an AWS SDK integration?, service, operation) of a Task state's ``Resource`` (a function's ARN: Lambda)."""
    integration = resource.split(":::", 1)[1] if resource.startswith("arn:aws:states:::") else "lambda:invoke"
    sdk = integration.startswith("aws-sdk:")
    service, action = integration.removeprefix("aws-sdk:").removesuffix(".sync").split(":")
    return sdk, service, operation_name(action)


def task_error(resource: str, code: str) -> str:
    """The name a Task state with this ``Resource`` gets for the AWS error ``code``."""
    sdk, service, operation = task_service(resource)
    return (sdk_error if sdk else optimized_error)(service, operation, code)
