"""What the Plan step knows about the deployed stack: resource names and ids, fixed at deploy time."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from infra.config import StageConfig, build_dataclass

SETTINGS_ENV = "WORKFLOW_SETTINGS"


@dataclasses.dataclass(frozen=True)
class StackSettings:
    """The stack's resources, passed to the Plan function as one JSON environment variable.

    Args:
        job_prefix: every SageMaker name starts with it; the state machine's IAM is scoped to it.
        source_dir_uri: the training package's ``sourcedir.tar.gz``.
        efs_datasets_path: the datasets directory on the file system (the DataSync access point's root).
        rule_evaluator_image: the region's SageMaker Debugger rule image.
        profiler_rule_parameters: each built-in profiler rule's ``RuleParameters``.
        images: the jobs' image URIs by :func:`infra.images.image_key`.
        without_volume_kms: instance types with local storage, where SageMaker refuses a volume KMS key.
            These four come from the SageMaker SDK, resolved at synth (``infra/sdk_tables.py``).
        stage: the stage configuration, whose values are the execution input's defaults.
    """

    region: str
    account: str
    job_prefix: str
    role_arn: str
    kms_key_arn: str
    raw_bucket: str
    datasets_bucket: str
    checkpoints_bucket: str
    models_bucket: str
    file_system_id: str
    efs_datasets_path: str
    subnet_ids: list[str]
    security_group_ids: list[str]
    source_dir_uri: str
    rule_evaluator_image: str
    profiler_rule_parameters: dict[str, dict[str, str]]
    images: dict[str, str]
    without_volume_kms: list[str]
    stage: dict[str, Any]

    @property
    def stage_config(self) -> StageConfig:
        return build_dataclass(StageConfig, self.stage, "stage.")

    @classmethod
    def from_env(cls) -> StackSettings:
        return cls(**json.loads(os.environ[SETTINGS_ENV]))
