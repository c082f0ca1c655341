"""What the Plan step knows about the deployed stack: resource names and ids, fixed at deploy time."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from infra.config import StageConfig, build_dataclass

# Lambda caps a function's environment at 4 KB (the JSON of its Variables map, escapes included), which these
# settings together exceed: 4,856 B for dev, each reference at its longest, of which the stage's defaults are 1,929 B
# and the SDK's tables most of the rest (tests/test_first_deploy.py's measure). The environment carries only the
# values deployment decides (CloudFormation references, 757 B), and the rest, known at synth, travels in the
# function's bundle as SETTINGS_FILE (a path in the bundle, which keeps the repository's layout: beside this module).
SETTINGS_ENV = "WORKFLOW_RESOURCES"
SETTINGS_FILE = "infra/plan_step/settings.json"
DEPLOY_TIME_FIELDS = (
    "stack_creation",
    "role_arn",
    "kms_key_arn",
    "raw_bucket",
    "datasets_bucket",
    "checkpoints_bucket",
    "models_bucket",
    "file_system_id",
    "subnet_ids",
    "security_group_ids",
)


@dataclasses.dataclass(frozen=True)
class StackSettings:
    """The stack's resources and the stage's defaults, as the Plan function reads them: ``DEPLOY_TIME_FIELDS``
    from its environment variable ``SETTINGS_ENV``, the others from its bundle's ``SETTINGS_FILE``.

    Args:
        job_prefix: every SageMaker name starts with it; the state machine's IAM is scoped to it.
        stack_creation: drawn anew each time CloudFormation creates the stack (``infra/naming.py``); job names
            hash it, so an execution name used again after a redeploy names new jobs.
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
    stack_creation: str
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
    def offline(cls, config: StageConfig, **stand_ins: Any) -> StackSettings:
        """The Plan function's settings as synthesis makes them for ``config``, with stand-ins for what only a
        deployment names (``DEPLOY_TIME_FIELDS`` and the package's URI); ``stand_ins`` replace any field but the
        SDK's tables (those of the region) and the stage."""
        from infra.sdk_tables import sdk_settings  # the SageMaker SDK's tables, as at synth (not in the bundle)

        account, region, prefix = config.account, config.region, config.job_prefix
        fields = {
            "region": region,
            "account": account,
            "job_prefix": prefix,
            "stack_creation": "0ff11e00",
            "role_arn": f"arn:aws:iam::{account}:role/{prefix}-jobs",
            "kms_key_arn": f"arn:aws:kms:{region}:{account}:key/offline",
            "raw_bucket": f"{prefix}-raw",
            "datasets_bucket": f"{prefix}-datasets",
            "checkpoints_bucket": f"{prefix}-checkpoints",
            "models_bucket": f"{prefix}-models",
            "file_system_id": "fs-offline",
            "efs_datasets_path": "/datasets",  # infra/storage/file_system.py's DATASETS_PATH
            "subnet_ids": ["subnet-offline"],
            "security_group_ids": ["sg-offline"],
            "source_dir_uri": f"s3://{prefix}-assets/sourcedir.tar.gz",
            **stand_ins,
        }
        return cls(**fields, **sdk_settings(fields["region"]), stage=json.loads(json.dumps(dataclasses.asdict(config))))

    @classmethod
    def from_parts(cls, environment: str, bundled: str) -> StackSettings:
        """From the environment variable's JSON (``DEPLOY_TIME_FIELDS``) and the bundled file's (the rest)."""
        return cls(**json.loads(environment), **json.loads(bundled))

    @classmethod
    def from_env(cls) -> StackSettings:
        """In the Plan function: its environment and the file its bundle carries beside this module."""
        bundle = Path(__file__).resolve().parents[2]
        return cls.from_parts(os.environ[SETTINGS_ENV], (bundle / SETTINGS_FILE).read_text())


def split_settings(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(environment, bundled): ``DEPLOY_TIME_FIELDS`` and the other fields of a :class:`StackSettings` dict."""
    environment = {k: v for k, v in settings.items() if k in DEPLOY_TIME_FIELDS}
    return environment, {k: v for k, v in settings.items() if k not in DEPLOY_TIME_FIELDS}
