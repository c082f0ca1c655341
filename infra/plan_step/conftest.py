"""Fixtures for the Plan step's unit tests: a stack's settings as the Plan function receives them."""

from __future__ import annotations

import pytest

from infra.config import load_stage_config
from infra.plan_step.settings import StackSettings
from tests.synth import cli_context


def make_settings(stage: str = "dev") -> StackSettings:
    """The stage's settings with the stand-ins the tests name."""
    return StackSettings.offline(
        load_stage_config({**cli_context(), "stage": stage}),
        region="us-east-1",
        account="123456789012",
        role_arn="arn:aws:iam::123456789012:role/sagemaker-execution",
        kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/1111-2222",
        raw_bucket="raw-bucket",
        datasets_bucket="datasets-bucket",
        checkpoints_bucket="checkpoints-bucket",
        models_bucket="models-bucket",
        file_system_id="fs-0123456789abcdef0",
        subnet_ids=["subnet-a", "subnet-b"],
        security_group_ids=["sg-jobs"],
        source_dir_uri="s3://cdk-assets/abc.gz",
    )


@pytest.fixture
def settings() -> StackSettings:
    return make_settings("dev")
