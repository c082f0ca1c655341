"""The typed configuration of one deployment stage, and the checks that run before anything is synthesized.

A stage's configuration is built in three layers, each overriding the one before:

1. the defaults of the dataclasses below;
2. the stage's entry in ``cdk.json`` (``context.stages.<name>``), chosen with ``-c stage=NAME``;
3. a JSON file given with ``-c config=path/to/file.json`` (any subset of the same fields).

Every value is checked: a wrong one raises :class:`ConfigError` naming the field, the bad value and
what would be valid, e.g. ``training.instance_count: 0 is not valid; expected a positive integer``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import types
import typing
from pathlib import Path
from typing import Any

from infra.instances import INSTANCE_TYPES
from infra.planner import fit_problem
from infra.presets import ModelShape, model_presets, shape_of

PLACEHOLDER_ACCOUNT = "123456789012"  # used for synth without credentials; deploy sets the real one
REGIONS = (
    "us-east-1",
    "us-east-2",
    "us-west-2",
    "eu-west-1",
    "eu-west-2",
    "eu-central-1",
    "eu-north-1",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-south-1",
    "ca-central-1",
)
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
PROFILING_INTERVALS_MS = (100, 200, 500, 1000, 5000, 60000)  # what SageMaker Debugger accepts
STATE_MACHINE_LOG_LEVELS = ("ALL", "ERROR")
SAGEMAKER_MAX_RUN_HOURS = 28 * 24  # SageMaker's limit on MaxRuntimeInSeconds: 28 days
MAX_VOCAB = 2**32  # token ids are stored as uint32 at most


class ConfigError(ValueError):
    """An invalid configuration value; the message names the field and the fix."""

    def __init__(self, field: str, value: Any, expected: str):
        super().__init__(f"{field}: {value!r} is not valid; expected {expected}")
        self.field = field


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """The VPC the jobs run in.

    Args:
        max_azs: availability zones to spread subnets over (default 2).
        nat_gateways: NAT gateways for egress from the private subnets (default 1; 0 needs ``isolated``).
        isolated: no internet egress at all; AWS services are reached through VPC interface endpoints.
    """

    max_azs: int = 2
    nat_gateways: int = 1
    isolated: bool = False


@dataclasses.dataclass(frozen=True)
class StorageConfig:
    """EFS, S3 and logs.

    Args:
        efs_throughput_mode: ``elastic`` (default), ``bursting`` or ``provisioned``.
        efs_provisioned_mibps: throughput for ``provisioned`` mode, in MiB/s.
        retain_data: keep the file system, buckets and key on ``cdk destroy`` (default true).
        log_retention_days: retention of the stack's CloudWatch log groups (a value CloudWatch accepts).
    """

    efs_throughput_mode: str = "elastic"
    efs_provisioned_mibps: int = 0
    retain_data: bool = True
    log_retention_days: int = 365


@dataclasses.dataclass(frozen=True)
class PreprocessingConfig:
    """Defaults of the preprocessing jobs (tokenizer training and sharding).

    Args:
        instance_type: processing instance type (default ml.c5.9xlarge, 36 vCPUs).
        instance_count: instances that shard the corpus in parallel.
        volume_size_gb: EBS volume per instance.
        shard_size_mb: target size of one token shard (default 1024, about 1 GiB).
        vocab_size: BPE vocabulary, end-of-text token included (default 50,257 as GPT-2/3).
        validation_fraction: fraction of documents held out for validation.
    """

    instance_type: str = "ml.c5.9xlarge"
    instance_count: int = 4
    volume_size_gb: int = 200
    shard_size_mb: int = 1024
    vocab_size: int = 50_257
    validation_fraction: float = 0.0005


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """Defaults of the training job.

    Args:
        model_preset: a name from ``training/gpt/presets.json`` (default gpt3-125m).
        n_layer, d_model, n_head: override the preset's shape (all optional).
        sequence_length: context length in tokens (default 2048).
        global_batch_tokens: tokens per optimizer step over all devices (default 524,288 = 0.5 M, GPT-3 125M's).
        micro_batch_size: sequences per device per forward pass; gradients accumulate to the global batch.
        train_tokens: tokens to train on; the step count is train_tokens / global_batch_tokens.
        precision: ``bf16`` (default), ``fp16`` (with loss scaling) or ``fp32``.
        recompute: recompute each block's activations in the backward pass (default true: +1/3 compute, but
            gpt3-125m at micro-batch 8 x 2048 tokens needs ~40 GiB per GPU without it; see ``make plan``).
        model_parallel_degree: pipeline stages per model replica; divides the GPUs per instance (default 1).
        microbatches: with model_parallel_degree > 1, micro-batches per GPipe pass (M); a divisor of the step's
            micro-batches per replica; 0 (default) = all of them in one pass. The bubble is (K - 1) / (M + K - 1).
        instance_type, instance_count: the training cluster.
        data_parallel_engine: ``multi_worker_mirrored`` (default, tf.distribute) or ``mpi`` (Horovod API).
        spot: managed spot training (checkpoints make interruptions harmless).
        max_run_hours: the job's MaxRuntime; spot waits up to twice as long.
        data_source: ``efs`` (default; the dataset is staged to EFS) or ``s3`` (FastFile mode).
        volume_size_gb: EBS volume per instance.
    """

    model_preset: str = "gpt3-125m"
    n_layer: int | None = None
    d_model: int | None = None
    n_head: int | None = None
    sequence_length: int = 2048
    global_batch_tokens: int = 524_288
    micro_batch_size: int = 8
    train_tokens: int = 10_000_000_000
    precision: str = "bf16"
    recompute: bool = True
    model_parallel_degree: int = 1
    microbatches: int = 0
    instance_type: str = "ml.p4d.24xlarge"
    instance_count: int = 1
    data_parallel_engine: str = "multi_worker_mirrored"
    spot: bool = True
    max_run_hours: int = 72
    data_source: str = "efs"
    volume_size_gb: int = 200

    @property
    def shape(self) -> ModelShape:
        """The preset's shape with any explicit override applied."""
        return shape_of(self.model_preset, self.n_layer, self.d_model, self.n_head)

    @property
    def data_parallel_replicas(self) -> int:
        """One replica per K pipeline-stage GPUs (or per instance for CPU types): 8 GPUs x 2 instances / K=1 = 16."""
        gpus = max(INSTANCE_TYPES[self.instance_type].gpus, 1) * self.instance_count
        return gpus // self.model_parallel_degree


@dataclasses.dataclass(frozen=True)
class DeployConfig:
    """The optional endpoint that serves the trained model.

    Args:
        enabled: deploy after training unless the execution input says otherwise (default false).
        instance_type, instance_count: the endpoint's instances.
    """

    enabled: bool = False
    instance_type: str = "ml.g5.xlarge"
    instance_count: int = 1


@dataclasses.dataclass(frozen=True)
class ObservabilityConfig:
    """Debugger profiling, the state machine's execution log and the alarms.

    Args:
        profiling_interval_ms: how often Debugger samples GPU, CPU, memory, network and I/O on every training
            instance (default 500; one of 100, 200, 500, 1000, 5000, 60000).
        state_machine_log_level: ``ALL`` (default: every state's start and end) or ``ERROR`` (failures only).
        log_execution_data: include each state's input and output in the log (default true).
        efs_throughput_alarm_percent: alarm when EFS throughput stays above this share of the permitted
            throughput for 5 minutes (default 80).
    """

    profiling_interval_ms: int = 500
    state_machine_log_level: str = "ALL"
    log_execution_data: bool = True
    efs_throughput_alarm_percent: int = 80


@dataclasses.dataclass(frozen=True)
class StageConfig:
    """Everything one deployment of the stack is configured with.

    Example:
        >>> cfg = load_stage_config({"stage": "dev", "stages": {"dev": {"training": {"spot": False}}}})
        >>> cfg.training.spot
        False
    """

    name: str = "dev"
    account: str = PLACEHOLDER_ACCOUNT
    region: str = "us-east-1"
    notification_email: str | None = None
    network: NetworkConfig = NetworkConfig()
    storage: StorageConfig = StorageConfig()
    preprocessing: PreprocessingConfig = PreprocessingConfig()
    training: TrainingConfig = TrainingConfig()
    deploy: DeployConfig = DeployConfig()
    observability: ObservabilityConfig = ObservabilityConfig()

    @property
    def stack_name(self) -> str:
        """The CloudFormation stack of this stage (also how the CLI finds a deployed stage)."""
        return f"GptPretraining-{self.name}"


# --- Loading ---------------------------------------------------------------------------------------


def load_stage_config(context: dict[str, Any], default_account: str | None = None) -> StageConfig:
    """Builds and validates the stage chosen by the CDK context (``stage``, ``stages``, ``config``).

    Args:
        context: the CDK context (cdk.json, cdk.context.json and ``-c`` values).
        default_account: the account of the caller's credentials (the CLI's ``CDK_DEFAULT_ACCOUNT``),
            used when the stage names none; without either, a placeholder lets synth run offline.
    """
    stages: dict[str, Any] = context.get("stages") or {}
    name = context.get("stage") or "dev"
    if name not in stages:
        raise ConfigError("stage", name, f"one of the stages in cdk.json: {', '.join(sorted(stages)) or '(none)'}")
    merged = deep_merge({"name": name, "account": default_account or PLACEHOLDER_ACCOUNT}, stages[name])
    if context.get("config"):
        merged = deep_merge(merged, _read_override_file(context["config"]))
    config = build_dataclass(StageConfig, merged, "")
    validate(config)
    return config


def _read_override_file(path: str) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise ConfigError("config", path, "the path of a JSON file with configuration overrides")
    try:
        data = json.loads(file.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError("config", path, f"valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise ConfigError("config", path, "a JSON object at the top level")
    return data


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def build_dataclass(cls: type, data: Any, prefix: str) -> Any:
    """Builds a config dataclass from a dict, rejecting unknown keys and values of the wrong type."""
    if not isinstance(data, dict):
        raise ConfigError(prefix.rstrip("."), data, "a JSON object")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    for key in data:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"{prefix}{key}", data[key], f"a known field ({hint}valid: {', '.join(names)})")
    values = {}
    for key, value in data.items():
        hint = hints[key]
        if typing.get_origin(hint) is dict:
            values[key] = _check_mapping(f"{prefix}{key}", value)
        elif dataclasses.is_dataclass(hint):
            values[key] = build_dataclass(hint, value, f"{prefix}{key}.")
        else:
            values[key] = _check_type(f"{prefix}{key}", value, hint)
    return cls(**values)


def _check_mapping(field: str, value: Any) -> dict[str, Any]:
    """A flat JSON object of names to numbers, strings or booleans (e.g. extra hyperparameters)."""
    if not isinstance(value, dict):
        raise ConfigError(field, value, "a JSON object of names to values")
    for key, item in value.items():
        if not isinstance(item, int | float | str | bool):
            raise ConfigError(f"{field}.{key}", item, "a number, string or boolean")
    return dict(value)


def _check_type(field: str, value: Any, hint: Any) -> Any:
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None and type(None) in allowed:
        return None
    for kind in allowed:
        if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind in (bool, str) and isinstance(value, kind):
            return value
    names = " or ".join("null" if k is type(None) else k.__name__ for k in allowed)
    raise ConfigError(field, value, f"a value of type {names}")


# --- Validation ------------------------------------------------------------------------------------


def _positive(field: str, value: int) -> None:
    if value <= 0:
        raise ConfigError(field, value, "a positive integer")


def _one_of(field: str, value: Any, choices: typing.Iterable[Any]) -> None:
    choices = list(choices)
    if value not in choices:
        close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(field, value, f"one of {', '.join(map(str, choices))}{hint}")


def validate(config: StageConfig) -> None:
    """Raises ConfigError for the first invalid value; returns None when the stage is usable."""
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,19}", config.name):
        raise ConfigError("stage", config.name, "lower-case letters, digits and '-', at most 20 characters")
    if not re.fullmatch(r"\d{12}", config.account):
        raise ConfigError("account", config.account, "a 12-digit AWS account id")
    _one_of("region", config.region, REGIONS)
    if config.notification_email is not None and not re.fullmatch(
        r"[^@\s]+@[^@\s]+\.[^@\s]+", config.notification_email
    ):
        raise ConfigError("notification_email", config.notification_email, "an e-mail address or null")
    _validate_network(config.network)
    _validate_storage(config.storage)
    _validate_preprocessing(config.preprocessing)
    _validate_training(config.training)
    _one_of("deploy.instance_type", config.deploy.instance_type, INSTANCE_TYPES)
    _positive("deploy.instance_count", config.deploy.instance_count)
    _validate_observability(config.observability)
    if problem := fit_problem(config.training, config.preprocessing.vocab_size):  # pre-flight: will it fit?
        raise ConfigError("training", *problem)


def _validate_network(net: NetworkConfig) -> None:
    _positive("network.max_azs", net.max_azs)
    if net.isolated and net.nat_gateways:
        raise ConfigError("network.nat_gateways", net.nat_gateways, "0 when network.isolated is true")
    if not net.isolated and not 1 <= net.nat_gateways <= net.max_azs:
        raise ConfigError(
            "network.nat_gateways", net.nat_gateways, f"1 to network.max_azs ({net.max_azs}), or set network.isolated"
        )


def _validate_storage(storage: StorageConfig) -> None:
    _one_of("storage.efs_throughput_mode", storage.efs_throughput_mode, ("elastic", "bursting", "provisioned"))
    if storage.efs_throughput_mode == "provisioned" and not 1 <= storage.efs_provisioned_mibps <= 3414:
        raise ConfigError(
            "storage.efs_provisioned_mibps", storage.efs_provisioned_mibps, "1 to 3414 MiB/s in provisioned mode"
        )
    _one_of("storage.log_retention_days", storage.log_retention_days, LOG_RETENTION_DAYS)


def _validate_preprocessing(pre: PreprocessingConfig) -> None:
    _one_of("preprocessing.instance_type", pre.instance_type, INSTANCE_TYPES)
    _positive("preprocessing.instance_count", pre.instance_count)
    _positive("preprocessing.volume_size_gb", pre.volume_size_gb)
    _positive("preprocessing.shard_size_mb", pre.shard_size_mb)
    if not 257 <= pre.vocab_size <= MAX_VOCAB:
        raise ConfigError("preprocessing.vocab_size", pre.vocab_size, f"257 (256 bytes + end-of-text) to {MAX_VOCAB:,}")
    if not 0.0 <= pre.validation_fraction < 0.5:
        raise ConfigError("preprocessing.validation_fraction", pre.validation_fraction, "a fraction from 0 to 0.5")


def _validate_training(train: TrainingConfig) -> None:
    _one_of("training.model_preset", train.model_preset, model_presets())
    for name in ("n_layer", "d_model", "n_head"):
        if getattr(train, name) is not None:
            _positive(f"training.{name}", getattr(train, name))
    shape = train.shape
    if shape.d_model % shape.n_head:
        raise ConfigError(
            "training.n_head",
            shape.n_head,
            f"a divisor of the model width d_model={shape.d_model} (e.g. {_divisor_near(shape)})",
        )
    for name in (
        "sequence_length",
        "global_batch_tokens",
        "micro_batch_size",
        "train_tokens",
        "instance_count",
        "model_parallel_degree",
        "max_run_hours",
        "volume_size_gb",
    ):
        _positive(f"training.{name}", getattr(train, name))
    _one_of("training.instance_type", train.instance_type, INSTANCE_TYPES)
    devices = max(INSTANCE_TYPES[train.instance_type].gpus, 1)
    if devices % train.model_parallel_degree or train.model_parallel_degree > shape.n_layer:
        raise ConfigError(
            "training.model_parallel_degree",
            train.model_parallel_degree,
            f"a divisor of the {devices} GPUs per {train.instance_type}, at most n_layer ({shape.n_layer})",
        )
    _one_of("training.precision", train.precision, ("bf16", "fp16", "fp32"))
    gpu = INSTANCE_TYPES[train.instance_type].gpu_model
    if train.precision == "bf16" and gpu == "V100":
        raise ConfigError("training.precision", "bf16", f"fp16 or fp32: {train.instance_type}'s V100 has no bfloat16")
    _one_of("training.data_parallel_engine", train.data_parallel_engine, ("multi_worker_mirrored", "mpi"))
    _one_of("training.data_source", train.data_source, ("efs", "s3"))
    if train.max_run_hours > SAGEMAKER_MAX_RUN_HOURS:
        raise ConfigError("training.max_run_hours", train.max_run_hours, f"at most {SAGEMAKER_MAX_RUN_HOURS} (28 days)")
    if train.global_batch_tokens % train.sequence_length:
        raise ConfigError(
            "training.global_batch_tokens",
            train.global_batch_tokens,
            f"a multiple of training.sequence_length ({train.sequence_length})",
        )
    per_step = train.micro_batch_size * train.data_parallel_replicas
    sequences = train.global_batch_tokens // train.sequence_length
    if sequences % per_step:
        raise ConfigError(
            "training.global_batch_tokens",
            train.global_batch_tokens,
            f"a multiple of sequence_length x micro_batch_size x replicas = {train.sequence_length} x "
            f"{train.micro_batch_size} x {train.data_parallel_replicas} = {train.sequence_length * per_step:,} tokens",
        )
    _validate_pipeline(train, sequences // per_step)


def _validate_pipeline(train: TrainingConfig, micro_batches_per_replica: int) -> None:
    """microbatches divides the micro-batches a replica runs per step; a pipeline needs one process per host."""
    if train.microbatches < 0 or (train.microbatches and micro_batches_per_replica % train.microbatches):
        raise ConfigError(
            "training.microbatches",
            train.microbatches,
            f"0 or a divisor of the {micro_batches_per_replica} micro-batches per replica of a step",
        )
    if train.model_parallel_degree > 1 and train.data_parallel_engine == "mpi":
        raise ConfigError(
            "training.data_parallel_engine",
            "mpi",
            "multi_worker_mirrored with model_parallel_degree > 1 (a pipeline is one process driving "
            "model_parallel_degree GPUs; the MPI engine runs one process per GPU)",
        )


def _validate_observability(obs: ObservabilityConfig) -> None:
    _one_of("observability.profiling_interval_ms", obs.profiling_interval_ms, PROFILING_INTERVALS_MS)
    _one_of("observability.state_machine_log_level", obs.state_machine_log_level, STATE_MACHINE_LOG_LEVELS)
    if not 1 <= obs.efs_throughput_alarm_percent <= 100:
        raise ConfigError(
            "observability.efs_throughput_alarm_percent", obs.efs_throughput_alarm_percent, "a percentage from 1 to 100"
        )


def _divisor_near(shape: ModelShape) -> int:
    divisors = [h for h in range(1, shape.d_model + 1) if shape.d_model % h == 0]
    return min(divisors, key=lambda h: abs(h - shape.n_head))
