"""The checks a stage's configuration passes before anything is synthesized: the first bad value raises."""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import typing
from typing import Any

from infra.aws_limits import S3_MAX_OBJECT_MB, SAGEMAKER_MAX_RUN_HOURS, aws_limits
from infra.config.operating import validate_operations
from infra.config.sections import (
    BUCKET_NAME,
    COMPLIANCE_PACKS,
    ECR_IMAGE,
    KMS_KEY_ARN,
    LOG_RETENTION_DAYS,
    MAX_SPOT_WAIT_HOURS,
    MAX_VOCAB,
    PROFILING_INTERVALS_MS,
    REGIONS,
    STAGE_NAME,
    STATE_MACHINE_LOG_LEVELS,
    ConfigError,
    NetworkConfig,
    ObservabilityConfig,
    PreprocessingConfig,
    SecurityConfig,
    StageConfig,
    StorageConfig,
    TrainingConfig,
)
from infra.estimate import fit_problem, time_problem
from infra.instances import INSTANCE_TYPES
from infra.training_code import ModelShape, model_presets, trained_presets, training_module

MAX_TRAIN_TOKENS = 10**15  # 70 times Llama 3's 15 T: bounds the step count and the estimate


# GPT-2's sizes (Radford et al. 2019, Table 2, as released: 124 M, 355 M, 774 M, 1.5 B parameters), to point a
# GPT-2 name at the preset of about its size.
GPT2_PARAMETERS = {"gpt2": 124e6, "gpt2-small": 124e6, "gpt2-medium": 355e6, "gpt2-large": 774e6, "gpt2-xl": 1.5e9}


def suggest_preset(name: str) -> str | None:
    """The preset a mistyped or foreign name most likely means: by size first, then by spelling.

    ``gpt2-small`` -> ``gpt3-125m`` (124 M parameters, not the 17 M ``small``), ``llama-7b`` -> ``gpt3-6.7b``,
    ``gpt3-125M`` -> ``gpt3-125m``, ``tiyn`` -> ``tiny``.
    """
    key = name.strip().lower()
    if key in trained_presets():
        return key
    size = GPT2_PARAMETERS.get(key)
    if size is None and (match := re.search(r"(\d+(?:\.\d+)?)\s*([mb])\b", key)):
        size = float(match.group(1)) * (1e6 if match.group(2) == "m" else 1e9)
    if size:
        counts = {n: s.parameters(50_257, 2048) for n, s in trained_presets().items()}
        return min(counts, key=lambda n: abs(math.log(counts[n] / size)))
    close = difflib.get_close_matches(key, list(trained_presets()), n=1)
    return close[0] if close else None


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
    if not re.fullmatch(STAGE_NAME, config.name):
        raise ConfigError(
            "stage",
            config.name,
            "lower-case letters and digits, starting with a letter, at most 20 (no '-': every IAM scope and event "
            "rule of stage NAME is gpt-NAME-*, which stage NAME-x's names would match too), e.g. prodeu",
        )
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
    for key in config.source_bucket_keys:
        if not re.fullmatch(KMS_KEY_ARN, key):
            raise ConfigError(
                "source_bucket_keys", key, "KMS key ARNs, arn:aws:kms:REGION:ACCOUNT:key/KEY-ID (not an alias)"
            )
    _validate_network(config.network, config.region)
    _validate_storage(config.storage)
    _validate_existing(config)
    _validate_preprocessing(config.preprocessing)
    _validate_training(config.training)
    _one_of("deploy.instance_type", config.deploy.instance_type, INSTANCE_TYPES)
    _accepted_by("deploy.instance_type", config.deploy.instance_type, "hosting")
    _positive("deploy.instance_count", config.deploy.instance_count)
    _validate_observability(config.observability)
    _validate_security(config.security)
    validate_operations(config)
    check_fit(config.training, config.preprocessing.vocab_size)


def check_fit(train: TrainingConfig, vocab_size: int) -> None:
    """The pre-flight estimate: the model of ``vocab_size`` embedding rows fits the devices, and the run its
    ``max_run_hours``; raises ConfigError naming the fixes."""
    if problem := fit_problem(train, vocab_size):
        raise ConfigError.sentence("training", problem)
    if problem := time_problem(train, vocab_size):
        raise ConfigError.sentence("training.max_run_hours", problem)


def _validate_network(net: NetworkConfig, region: str) -> None:
    _positive("network.max_azs", net.max_azs)
    zones = net.availability_zones
    if zones and (len(zones) != net.max_azs or len(set(zones)) != len(zones)):
        raise ConfigError("network.availability_zones", list(zones), f"{net.max_azs} distinct zones (network.max_azs)")
    for zone in zones:
        if not re.fullmatch(rf"{region}[a-z]", zone):
            raise ConfigError("network.availability_zones", zone, f"a zone of the stage's region, e.g. {region}a")
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


def _validate_existing(config: StageConfig) -> None:
    """Names that AWS would accept, all five buckets or none, and the key that encrypts what is adopted."""
    existing, field = config.storage.existing, "storage.existing."
    key = rf"arn:aws:kms:{config.region}:{config.account}:key/[0-9a-f]{{8}}(-[0-9a-f]{{4}}){{3}}-[0-9a-f]{{12}}"
    if existing.kms_key_arn is not None and not re.fullmatch(key, existing.kms_key_arn):
        raise ConfigError(
            f"{field}kms_key_arn", existing.kms_key_arn, "a KMS key ARN in the stage's account and region"
        )
    if existing.file_system_id is not None and not re.fullmatch(
        r"fs-[0-9a-f]{8}([0-9a-f]{9})?", existing.file_system_id
    ):
        raise ConfigError(f"{field}file_system_id", existing.file_system_id, "an EFS file system id, fs-0123abcd...")
    names = {
        f"{field}{f.name}": getattr(existing, f.name)
        for f in dataclasses.fields(existing)
        if f.name.endswith("_bucket")
    }
    for name, value in names.items():
        if value is not None and not re.fullmatch(BUCKET_NAME, value):
            raise ConfigError(name, value, "an S3 bucket name (3-63 lower-case letters, digits, '.', '-')")
    if any(names.values()) and not all(names.values()):
        missing = next(name for name, value in names.items() if value is None)
        raise ConfigError(missing, None, "a bucket name: adopt all five retained buckets or none")
    if (any(names.values()) or existing.file_system_id) and existing.kms_key_arn is None:
        raise ConfigError(
            f"{field}kms_key_arn", None, "the retained data key's ARN: it encrypts the adopted buckets and file system"
        )


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
    shape = model_presets().get(train.model_preset)
    if shape is not None and shape.architecture != "gpt":
        raise ConfigError(
            "training.model_preset",
            train.model_preset,
            f"a gpt preset: {train.model_preset} is a {shape.architecture} shape, which python -m infra.estimate "
            "models but the training job does not train yet",
        )
    if train.model_preset not in trained_presets():
        close = suggest_preset(train.model_preset)
        hint = f" (did you mean {close!r}?)" if close else ""
        raise ConfigError("training.model_preset", train.model_preset, f"one of {', '.join(trained_presets())}{hint}")
    for name in ("n_layer", "d_model", "n_head", "sequence_length", "global_batch_tokens", "micro_batch_size"):
        if getattr(train, name) is not None:
            _positive(f"training.{name}", getattr(train, name))
            _in_schema_range(f"training.{name}", getattr(train, name), name)
    if train.train_tokens > MAX_TRAIN_TOKENS:
        raise ConfigError("training.train_tokens", train.train_tokens, f"at most {MAX_TRAIN_TOKENS:.0e} tokens")
    shape = train.shape
    if shape.d_model % shape.n_head:
        raise ConfigError(
            "training.n_head",
            shape.n_head,
            f"a divisor of the model width d_model={shape.d_model} (e.g. {_divisor_near(shape)})",
        )
    for name in (
        "train_tokens",
        "instance_count",
        "model_parallel_degree",
        "max_run_hours",
        "spot_wait_hours",
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
    if isinstance(train.recompute, str):
        _one_of("training.recompute", train.recompute, training_module("hparams").RECOMPUTE_MODES)
    gpu = INSTANCE_TYPES[train.instance_type].gpu_model
    if train.precision == "bf16" and gpu == "V100":
        raise ConfigError("training.precision", "bf16", f"fp16 or fp32: {train.instance_type}'s V100 has no bfloat16")
    _one_of("training.data_parallel_engine", train.data_parallel_engine, ("multi_worker_mirrored", "mpi"))
    if train.image_uri is not None and not re.fullmatch(ECR_IMAGE, train.image_uri):
        raise ConfigError(
            "training.image_uri", train.image_uri, "an ECR image URI, ACCOUNT.dkr.ecr.REGION.amazonaws.com/NAME:TAG"
        )
    if train.image_forwards_signals and train.image_uri is None:
        raise ConfigError(
            "training.image_forwards_signals", True, "false: the stock image's entrypoint does not pass SIGTERM on"
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
    if train.spot_wait_hours > MAX_SPOT_WAIT_HOURS:
        raise ConfigError(
            "training.spot_wait_hours", train.spot_wait_hours, f"at most {MAX_SPOT_WAIT_HOURS} (28 days of waiting)"
        )
    _check_batch(train)


def _check_batch(train: TrainingConfig) -> None:
    """The global batch splits into micro-batches over the replicas, and a pipeline's passes divide them."""
    batch = training_module("batch")
    try:
        accumulation = batch.accumulation_steps(
            train.global_batch_tokens, train.micro_batch_size, train.sequence_length, train.data_parallel_replicas
        )
        batch.pipeline_microbatches(accumulation, train.microbatches, stages=train.model_parallel_degree)
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
    for name in ("loss_window_steps", "skipped_window_steps", "stalled_minutes", "alarm_minutes"):
        _positive(f"observability.{name}", getattr(obs, name))
    for name in ("profile_start", "profile_steps", "max_skipped_steps"):
        if getattr(obs, name) < 0:
            raise ConfigError(f"observability.{name}", getattr(obs, name), "a non-negative integer")
    if not 1 <= obs.capacity_wait_alarm_hours <= MAX_SPOT_WAIT_HOURS:
        hours = obs.capacity_wait_alarm_hours
        raise ConfigError("observability.capacity_wait_alarm_hours", hours, f"1 to {MAX_SPOT_WAIT_HOURS} hours")


MIN_REASON_CHARACTERS = 20


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
    reason, field = sec.inter_container_encryption_off_reason.strip(), "security.inter_container_encryption_off_reason"
    if not sec.inter_container_encryption and not MIN_REASON_CHARACTERS <= len(reason) <= 500:
        raise ConfigError(
            field, reason, f"why the hosts' traffic may go unencrypted, {MIN_REASON_CHARACTERS} to 500 characters"
        )
    if sec.inter_container_encryption and reason:
        raise ConfigError(field, reason, "no reason while security.inter_container_encryption is true")


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


def _in_schema_range(field: str, value: int, hyperparameter: str) -> None:
    """Within the range train.py states for the hyperparameter the field becomes (which bounds every search)."""
    kind = training_module("hparams").BY_NAME[hyperparameter].kind
    if not kind.low <= value <= kind.high:
        raise ConfigError(field, value, kind.expected)


def _divisor_near(shape: ModelShape) -> int:
    divisors = [h for h in range(1, shape.d_model + 1) if shape.d_model % h == 0]
    return min(divisors, key=lambda h: abs(h - shape.n_head))
