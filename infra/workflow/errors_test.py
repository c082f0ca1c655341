"""Error names against the Step Functions guide's own examples and botocore's models."""

from __future__ import annotations

import pytest

from infra.workflow.errors import task_error


@pytest.mark.parametrize(
    ("resource", "code", "name"),
    [
        ("arn:aws:states:::aws-sdk:datasync:startTaskExecution", "InternalException", "DataSync.InternalException"),
        (
            "arn:aws:states:::aws-sdk:datasync:describeTaskExecution",
            "ThrottlingException",
            "DataSync.DataSyncException",
        ),
        ("arn:aws:states:::aws-sdk:sagemaker:describeEndpoint", "ValidationException", "SageMaker.SageMakerException"),
        # The guide's SageMaker examples retry these two names.
        (
            "arn:aws:states:::sagemaker:createTrainingJob.sync",
            "ResourceLimitExceeded",
            "SageMaker.ResourceLimitExceededException",
        ),
        (
            "arn:aws:states:::sagemaker:createTrainingJob.sync",
            "ThrottlingException",
            "SageMaker.AmazonSageMakerException",
        ),
        (
            "arn:aws:lambda:us-east-1:123456789012:function:plan",
            "TooManyRequestsException",
            "Lambda.TooManyRequestsException",
        ),
    ],
)
def test_names_follow_the_modeled_shape_or_the_services_base_exception(resource, code, name):
    assert task_error(resource, code) == name
