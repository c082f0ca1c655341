"""The typed configuration of one deployment stage, and the checks that run before anything is synthesized.

A stage's configuration is built in three layers, each overriding the one before:

1. the defaults of the dataclasses (``sections.py``);
2. the stage's entry in ``cdk.json`` (``context.stages.<name>``), chosen with ``-c stage=NAME``;
3. a JSON file given with ``-c config=path/to/file.json`` (any subset of the same fields).

Every value is checked: a wrong one raises :class:`ConfigError` naming the field, the bad value and
what would be valid, e.g. ``training.instance_count: 0 is not valid; expected a positive integer``.

The sections are in ``sections.py``, their building from the context in ``loading.py``, the checks in
``validation.py``; the rest of the project imports them from here.
"""

from infra.aws_limits import SAGEMAKER_MAX_RUN_HOURS
from infra.config.loading import build_dataclass, build_stage_config, deep_merge, load_stage_config, parse_count
from infra.config.sections import (
    BUCKET_NAME,
    COMPLIANCE_PACKS,
    ECR_IMAGE,
    LOG_RETENTION_DAYS,
    MAX_SPOT_WAIT_HOURS,
    MAX_VOCAB,
    PLACEHOLDER_ACCOUNT,
    PROFILING_INTERVALS_MS,
    REGIONS,
    STATE_MACHINE_LOG_LEVELS,
    ConfigError,
    DeployConfig,
    NetworkConfig,
    ObservabilityConfig,
    PreprocessingConfig,
    SecurityConfig,
    StageConfig,
    StorageConfig,
    TrainingConfig,
)
from infra.config.validation import check_fit, validate

__all__ = [
    "BUCKET_NAME",
    "COMPLIANCE_PACKS",
    "ECR_IMAGE",
    "LOG_RETENTION_DAYS",
    "MAX_SPOT_WAIT_HOURS",
    "MAX_VOCAB",
    "PLACEHOLDER_ACCOUNT",
    "PROFILING_INTERVALS_MS",
    "REGIONS",
    "SAGEMAKER_MAX_RUN_HOURS",
    "STATE_MACHINE_LOG_LEVELS",
    "ConfigError",
    "DeployConfig",
    "NetworkConfig",
    "ObservabilityConfig",
    "PreprocessingConfig",
    "SecurityConfig",
    "StageConfig",
    "StorageConfig",
    "TrainingConfig",
    "build_dataclass",
    "build_stage_config",
    "check_fit",
    "deep_merge",
    "load_stage_config",
    "parse_count",
    "validate",
]
