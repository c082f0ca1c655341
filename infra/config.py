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

from infra.aws_limits import S3_MAX_OBJECT_MB, aws_limits
from infra.estimate import fit_problem
from infra.instances import INSTANCE_TYPES
from infra.presets import ModelShape, model_presets, shape_of
from infra.training_code import training_module

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
# cdk-nag's packs by class name without "Checks" (infra/nag.py runs them); AwsSolutions always runs.
COMPLIANCE_PACKS = ("AwsSolutions", "NIST80053R5", "HIPAASecurity", "PCIDSS321")
BUCKET_NAME = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
ECR_IMAGE = r"\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[a-z0-9][a-z0-9._/-]*(:[\w.-]+|@sha256:[0-9a-f]{64})"


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
            gpt3-125m at micro-batch 8 x 2048 tokens needs ~40 GiB per GPU without it; see ``make estimate``).
        model_parallel_degree: pipeline stages per model replica; divides the GPUs per instance (default 1).
        microbatches: with model_parallel_degree > 1, micro-batches per GPipe pass (M); a divisor of the step's
            micro-batches per replica; 0 (default) = all of them in one pass. The bubble is (K - 1) / (M + K - 1).
        instance_type, instance_count: the training cluster.
        data_parallel_engine: ``multi_worker_mirrored`` (default, tf.distribute) or ``mpi`` (Horovod API; needs an
            ``image_uri`` with Horovod: the stock TF 2.21 image has none).
        image_uri: a custom training image (ECR URI) instead of the stock TensorFlow 2.21 one.
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
    image_uri: str | None = None
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
    """Debugger (optional), the training health rules and their alarms, TensorBoard, the execution log.

    Args:
        debugger: give training jobs SageMaker Debugger's profiling and profiler rules (default false:
            Debugger is closed to accounts that did not use it before 2026-07-30; the health rules below
            work in every account).
        profiling_interval_ms: how often Debugger samples GPU, CPU, memory, network and I/O on every training
            instance, when ``debugger`` is on (default 500; one of 100, 200, 500, 1000, 5000, 60000).
        profile_start, profile_steps: the TensorFlow profiler traces steps ``profile_start`` ..
            ``profile_start + profile_steps - 1`` into the job's TensorBoard logs (defaults 20 and 5; 0 steps: none).
        gpu_underused_percent: health rule and alarm: GPUs busy less than this (% per GPU) for
            ``alarm_minutes`` (default 60).
        input_bound_percent: more than this share of step time waiting for input (default 20).
        loss_min_drop_percent: the loss must fall at least this much (relative) over ``loss_window_steps``
            steps (defaults 1 and 500).
        stalled_minutes: a job with no new step for this long (default 30).
        memory_percent: peak device memory, or host memory, above this share (default 90).
        max_skipped_steps: steps skipped for a non-finite loss or gradient (fp16) beyond this (default 10).
        alarm_minutes: how long a health condition lasts before its alarm fires (default 15).
        state_machine_log_level: ``ALL`` (default: every state's start and end) or ``ERROR`` (failures only).
        log_execution_data: include each state's input and output in the log (default true).
        efs_throughput_alarm_percent: alarm when EFS throughput stays above this share of the permitted
            throughput for 5 minutes (default 80).
    """

    debugger: bool = False
    profiling_interval_ms: int = 500
    profile_start: int = 20
    profile_steps: int = 5
    gpu_underused_percent: int = 60
    input_bound_percent: int = 20
    loss_min_drop_percent: float = 1.0
    loss_window_steps: int = 500
    stalled_minutes: int = 30
    memory_percent: int = 90
    max_skipped_steps: int = 10
    alarm_minutes: int = 15
    state_machine_log_level: str = "ALL"
    log_execution_data: bool = True
    efs_throughput_alarm_percent: int = 80

    def health_rules(self) -> dict[str, float | int]:
        """The thresholds train.py's health rules take (hyperparameter ``health_rules``)."""
        names = (
            "gpu_underused_percent", "input_bound_percent", "loss_min_drop_percent", "loss_window_steps",
            "stalled_minutes", "memory_percent", "max_skipped_steps",
        )  # fmt: skip
        return {name: getattr(self, name) for name in names}


@dataclasses.dataclass(frozen=True)
class SecurityConfig:
    """The compliance checks every synth must pass, and the Plan function's concurrency.

    Args:
        compliance_packs: the cdk-nag packs that run at synth, by class name without ``Checks``; an
            unacknowledged finding of any fails synthesis. ``AwsSolutions`` always; any of ``NIST80053R5``,
            ``HIPAASecurity``, ``PCIDSS321`` (default: all four).
        plan_reserved_concurrency: concurrent executions reserved for the Plan function, and its cap
            (default 5). 0 leaves it unreserved: for accounts at Lambda's quota of 10, where any
            reservation fails deployment (AWS keeps 10 unreserved).
    """

    compliance_packs: tuple[str, ...] = COMPLIANCE_PACKS
    plan_reserved_concurrency: int = 5


@dataclasses.dataclass(frozen=True)
class StageConfig:
    """Everything one deployment of the stack is configured with.

    ``source_buckets``: buckets besides the stack's raw bucket that corpora and tokenizers may be read from;
    the jobs' role (and the Plan function, for listing) may then read them.

    Example:
        >>> cfg = load_stage_config({"stage": "dev", "stages": {"dev": {"training": {"spot": False}}}})
        >>> cfg.training.spot
        False
    """

    name: str = "dev"
    account: str = PLACEHOLDER_ACCOUNT
    region: str = "us-east-1"
    notification_email: str | None = None
    source_buckets: tuple[str, ...] = ()
    network: NetworkConfig = NetworkConfig()
    storage: StorageConfig = StorageConfig()
    preprocessing: PreprocessingConfig = PreprocessingConfig()
    training: TrainingConfig = TrainingConfig()
    deploy: DeployConfig = DeployConfig()
    observability: ObservabilityConfig = ObservabilityConfig()
    security: SecurityConfig = SecurityConfig()

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
    layers = [stages[name], _read_override_file(context["config"]) if context.get("config") else {}]
    for where, layer in zip((f"stages.{name}", "config"), layers, strict=True):
        if isinstance(layer, dict) and "name" in layer:  # a second name would write another stage's stack
            raise ConfigError(
                f"{where}.name", layer["name"], f"no name: the stage's name comes from -c stage ({name!r})"
            )
    merged = {"name": name, "account": default_account or PLACEHOLDER_ACCOUNT}
    for layer in layers:
        merged = deep_merge(merged, layer)
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
        elif typing.get_origin(hint) is tuple:
            values[key] = _check_strings(f"{prefix}{key}", value)
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


def _check_strings(field: str, value: Any) -> tuple[str, ...]:
    """A JSON array of strings (e.g. pack or bucket names)."""
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise ConfigError(field, value, "a JSON array of strings")
    return tuple(value)


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
    for bucket in config.source_buckets:
        if not re.fullmatch(BUCKET_NAME, bucket):
            raise ConfigError("source_buckets", bucket, "S3 bucket names (3-63 lower-case letters, digits, '.', '-')")
    _validate_network(config.network)
    _validate_storage(config.storage)
    _validate_preprocessing(config.preprocessing)
    _validate_training(config.training)
    _one_of("deploy.instance_type", config.deploy.instance_type, INSTANCE_TYPES)
    _accepted_by("deploy.instance_type", config.deploy.instance_type, "hosting")
    _positive("deploy.instance_count", config.deploy.instance_count)
    _validate_observability(config.observability)
    _validate_security(config.security)
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
    _accepted_by("preprocessing.instance_type", pre.instance_type, "processing")
    limits = aws_limits()
    _within(
        "preprocessing.instance_count", pre.instance_count, limits.processing_instance_count, "ProcessingInstanceCount"
    )
    _within("preprocessing.volume_size_gb", pre.volume_size_gb, limits.processing_volume_gb, "ProcessingVolumeSizeInGB")
    _positive("preprocessing.shard_size_mb", pre.shard_size_mb)
    largest = min(S3_MAX_OBJECT_MB, pre.volume_size_gb * 1024)  # a shard is written to the volume, then to S3
    if pre.shard_size_mb > largest:
        raise ConfigError(
            "preprocessing.shard_size_mb",
            pre.shard_size_mb,
            f"at most {largest:,} MB: a shard fits the instance's volume (volume_size_gb {pre.volume_size_gb} x 1,024) "
            f"and S3's 5 TiB object limit",
        )
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
    _accepted_by("training.instance_type", train.instance_type, "training")
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
    if train.image_uri is not None and not re.fullmatch(ECR_IMAGE, train.image_uri):
        raise ConfigError(
            "training.image_uri", train.image_uri, "an ECR image URI, ACCOUNT.dkr.ecr.REGION.amazonaws.com/NAME:TAG"
        )
    if train.data_parallel_engine == "mpi" and train.image_uri is None:
        raise ConfigError(
            "training.data_parallel_engine",
            "mpi",
            "multi_worker_mirrored: the MPI engine runs the Horovod API, which the stock TensorFlow 2.21 image "
            "does not ship (Horovod does not build against TF 2.21); set training.image_uri to an image with "
            "Horovod to use it",
        )
    _one_of("training.data_source", train.data_source, ("efs", "s3"))
    if train.max_run_hours > SAGEMAKER_MAX_RUN_HOURS:
        raise ConfigError("training.max_run_hours", train.max_run_hours, f"at most {SAGEMAKER_MAX_RUN_HOURS} (28 days)")
    _check_batch(train)


def _check_batch(train: TrainingConfig) -> None:
    """The global batch splits into micro-batches over the replicas, and a pipeline's passes divide them."""
    batch = training_module("batch")
    try:
        accumulation = batch.accumulation_steps(
            train.global_batch_tokens, train.micro_batch_size, train.sequence_length, train.data_parallel_replicas
        )
        batch.pipeline_microbatches(accumulation, train.microbatches)
    except batch.BatchError as error:
        raise ConfigError(f"training.{error.field}", error.value, error.expected) from error
    _validate_pipeline(train)


def _validate_pipeline(train: TrainingConfig) -> None:
    """A pipeline needs one process per host."""
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
    for name in ("efs_throughput_alarm_percent", "gpu_underused_percent", "input_bound_percent", "memory_percent"):
        if not 1 <= getattr(obs, name) <= 100:
            raise ConfigError(f"observability.{name}", getattr(obs, name), "a percentage from 1 to 100")
    if not 0 <= obs.loss_min_drop_percent < 100:
        raise ConfigError(
            "observability.loss_min_drop_percent", obs.loss_min_drop_percent, "a percentage from 0 to 100"
        )
    for name in ("loss_window_steps", "stalled_minutes", "alarm_minutes"):
        _positive(f"observability.{name}", getattr(obs, name))
    for name in ("profile_start", "profile_steps", "max_skipped_steps"):
        if getattr(obs, name) < 0:
            raise ConfigError(f"observability.{name}", getattr(obs, name), "a non-negative integer")


def _validate_security(sec: SecurityConfig) -> None:
    field = "security.compliance_packs"
    for name in sec.compliance_packs:
        _one_of(field, name, COMPLIANCE_PACKS)
    if "AwsSolutions" not in sec.compliance_packs:
        raise ConfigError(field, list(sec.compliance_packs), "a list that includes 'AwsSolutions' (it always runs)")
    if len(set(sec.compliance_packs)) != len(sec.compliance_packs):
        raise ConfigError(field, list(sec.compliance_packs), "each pack at most once")
    if not 0 <= sec.plan_reserved_concurrency <= 1000:
        raise ConfigError("security.plan_reserved_concurrency", sec.plan_reserved_concurrency, "0 (unreserved) to 1000")


def _accepted_by(field: str, instance_type: str, api: str) -> None:
    """``instance_type`` is one the API accepts (botocore's TrainingInstanceType, ProcessingInstanceType or
    ProductionVariantInstanceType enum)."""
    limits = aws_limits()
    accepted = {
        "training": limits.training_instance_types,
        "processing": limits.processing_instance_types,
        "hosting": limits.hosting_instance_types,
    }[api]
    if instance_type not in accepted:
        known = [t for t in INSTANCE_TYPES if t in accepted]
        raise ConfigError(field, instance_type, f"an instance type SageMaker {api} accepts: {', '.join(known)}")


def _within(field: str, value: int, span: tuple[int, int], shape: str) -> None:
    low, high = span
    if not low <= value <= high:
        raise ConfigError(field, value, f"{low} to {high:,} (SageMaker's limit, {shape})")


def _divisor_near(shape: ModelShape) -> int:
    divisors = [h for h in range(1, shape.d_model + 1) if shape.d_model % h == 0]
    return min(divisors, key=lambda h: abs(h - shape.n_head))
