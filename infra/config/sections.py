"""The stage configuration's sections: one frozen dataclass each, its defaults and documented fields.

Also the tables the checks read (regions, log retentions, packs) and :class:`ConfigError`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from infra.instances import INSTANCE_TYPES
from infra.training_code import ModelShape, shape_of, training_module

# train.py's health rules (training/contract/health.py) and their default thresholds, which the alarms use too.
HEALTH_DEFAULTS = training_module("health").HealthRules()

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
MAX_VOCAB = 2**32  # token ids are stored as uint32 at most
# Our cap on training.spot_wait_hours (SageMaker has none on MaxWait): four weeks of waiting, as long as the longest
# run; the training Task state's timeout outlasts the longest MaxWait it allows (plan_step/requests.py).
MAX_SPOT_WAIT_HOURS = 28 * 24
# cdk-nag's packs by class name without "Checks" (infra/nag.py runs them); AwsSolutions always runs.
COMPLIANCE_PACKS = ("AwsSolutions", "NIST80053R5", "HIPAASecurity", "PCIDSS321")
STAGE_NAME = r"[a-z][a-z0-9]{0,19}"  # no '-': gpt-<stage>- must not begin another stage's names
BUCKET_NAME = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
KMS_KEY_ARN = r"arn:aws(-cn|-us-gov)?:kms:[a-z0-9-]+:\d{12}:key/(mrk-)?[0-9a-f-]{32,36}"  # a key's ARN, no alias
ECR_IMAGE = r"\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[a-z0-9][a-z0-9._/-]*(:[\w.-]+|@sha256:[0-9a-f]{64})"


class ConfigError(ValueError):
    """An invalid configuration value; the message names the field and the fix."""

    def __init__(self, field: str, value: Any, expected: str):
        super().__init__(f"{field}: {training_module('hparams').shown(value)} is not valid; expected {expected}")
        self.field = field

    @classmethod
    def sentence(cls, field: str, text: str) -> ConfigError:
        """An error about a combination of fields, in words: ``training: the run needs about 313 h but ...``."""
        error = cls.__new__(cls)
        ValueError.__init__(error, f"{field}: {text}")
        error.field = field
        return error


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """The VPC the jobs run in.

    Args:
        max_azs: availability zones to spread subnets over (default 2).
        availability_zones: which ones, by name, ``max_azs`` of them (default: the region's first ones). The
            jobs' subnets, the file system's mount targets and an isolated stage's interface endpoints are
            placed in them: choose zones where every endpoint's service is offered (README, "Deploying to AWS").
        nat_gateways: NAT gateways for egress from the private subnets (default 1; 0 needs ``isolated``).
        isolated: no internet egress at all; AWS services are reached through VPC interface endpoints.
        cidr: the VPC's address range, a /16 to /20 of 10.0.0.0/8 (default: ``10.N.0.0/16``, N from 32 to 231
            drawn from the stage's name, ``infra/config/operating.py``), distinct from every other stage's in cdk.json.
    """

    max_azs: int = 2
    availability_zones: tuple[str, ...] = ()
    nat_gateways: int = 1
    isolated: bool = False
    cidr: str | None = None


@dataclasses.dataclass(frozen=True)
class ExistingResources:
    """What an earlier deployment of the stage kept on ``cdk destroy`` (``retain_data``), adopted by this one
    instead of created anew beside it (none by default). The stack never deletes what it adopts.

    Args:
        kms_key_arn: the retained data key; required with the buckets or the file system, which it encrypts.
        access_logs_bucket, raw_bucket, datasets_bucket, checkpoints_bucket, models_bucket: the retained
            buckets' names, all five or none (the data buckets still log to the access-log bucket); the stack
            gives them their TLS-only and log-delivery bucket policies again.
        file_system_id: the retained file system (``fs-...``); the stack gives it mount targets in its VPC
            and its ``/datasets`` access point again.
    """

    kms_key_arn: str | None = None
    access_logs_bucket: str | None = None
    raw_bucket: str | None = None
    datasets_bucket: str | None = None
    checkpoints_bucket: str | None = None
    models_bucket: str | None = None
    file_system_id: str | None = None

    @property
    def buckets(self) -> dict[str, str | None]:
        """Construct id (``infra/storage/buckets.py``) -> adopted name."""
        return {
            "AccessLogs": self.access_logs_bucket,
            "Raw": self.raw_bucket,
            "Datasets": self.datasets_bucket,
            "Checkpoints": self.checkpoints_bucket,
            "Models": self.models_bucket,
        }


@dataclasses.dataclass(frozen=True)
class StorageConfig:
    """EFS, S3 and logs.

    Args:
        efs_throughput_mode: ``elastic`` (default), ``bursting`` or ``provisioned``.
        efs_provisioned_mibps: throughput for ``provisioned`` mode, in MiB/s.
        retain_data: keep the file system, buckets and key on ``cdk destroy`` (default true).
        log_retention_days: retention of the stack's CloudWatch log groups (a value CloudWatch accepts).
        existing: retained resources to adopt (:class:`ExistingResources`; default none).
    """

    efs_throughput_mode: str = "elastic"
    efs_provisioned_mibps: int = 0
    retain_data: bool = True
    log_retention_days: int = 365
    existing: ExistingResources = ExistingResources()


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
        model_preset: a name from ``training/contract/presets.json`` (default gpt3-125m).
        n_layer, d_model, n_head: override the preset's shape (all optional).
        sequence_length: context length in tokens (default 2048).
        global_batch_tokens: tokens per optimizer step over all devices (default 524,288 = 0.5 M, GPT-3 125M's).
        micro_batch_size: sequences per device per forward pass; gradients accumulate to the global batch.
        train_tokens: tokens to train on; the step count is train_tokens / global_batch_tokens.
        precision: ``bf16`` (default), ``fp16`` (with loss scaling) or ``fp32``.
        recompute: what each block recomputes in the backward pass instead of keeping: ``none``, ``attention``,
            ``mlp`` or ``full`` (true = full, false = none; ``training/contract/hparams.py``); unset (default) = the
            least that fits, the fewest FLOPs (``make estimate``'s "least recompute that fits", the Plan step's).
        model_parallel_degree: pipeline stages per model replica; divides the GPUs per instance (default 1).
        microbatches: with model_parallel_degree > 1, micro-batches per GPipe pass (M); a divisor of the step's
            micro-batches per replica; 0 (default) = the fewest whose bubble (K - 1) / (M + K - 1) is at most 10%,
            or all of them where none is.
        instance_type, instance_count: the training cluster.
        data_parallel_engine: ``multi_worker_mirrored`` (default, tf.distribute) or ``mpi`` (Horovod API; needs an
            ``image_uri`` with Horovod: the stock TF 2.21 image has none).
        image_uri: a custom training image (ECR URI) instead of the stock TensorFlow 2.21 one.
        image_forwards_signals: ``image_uri``'s entrypoint passes SIGTERM on to the training script itself, so the
            job runs the image as is (default false: a small init in front of it does, see plan_step/container.py).
        spot: managed spot training (checkpoints make interruptions harmless).
        max_run_hours: the job's MaxRuntime: its hours of running, at most 672 (28 days, SageMaker's limit).
        spot_wait_hours: with spot, the hours the job may wait for capacity in all, at the start and after each
            interruption (default 72, at most 672): SageMaker stops it at MaxWait = max_run_hours +
            spot_wait_hours (MaxWaitTimeExceeded); a rerun resumes from its checkpoints. The capacity alarm
            (``observability.capacity_wait_alarm_hours``) tells the topic long before.
        data_source: ``efs`` (default; the dataset is staged to EFS) or ``s3`` (FastFile mode).
        volume_size_gb: EBS volume per instance.
        hf_checkpoint: also export a Hugging Face GPT-2 checkpoint (``hf/`` in the model archive: config.json,
            model.safetensors, the tokenizer) that transformers, lm-evaluation-harness and vLLM load (default true).
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
    recompute: bool | str | None = None
    model_parallel_degree: int = 1
    microbatches: int = 0
    instance_type: str = "ml.p4d.24xlarge"
    instance_count: int = 1
    data_parallel_engine: str = "multi_worker_mirrored"
    image_uri: str | None = None
    image_forwards_signals: bool = False
    spot: bool = True
    max_run_hours: int = 72
    spot_wait_hours: int = 72
    data_source: str = "efs"
    volume_size_gb: int = 200
    hf_checkpoint: bool = True

    @property
    def shape(self) -> ModelShape:
        """The preset's shape with any explicit override applied."""
        return shape_of(self.model_preset, self.n_layer, self.d_model, self.n_head)

    @property
    def data_parallel_replicas(self) -> int:
        """One replica per K pipeline-stage GPUs (or per instance for CPU types): 8 GPUs x 2 instances / K=1 = 16."""
        devices = INSTANCE_TYPES[self.instance_type].devices
        return training_module("batch").replicas(devices, self.instance_count, self.model_parallel_degree)


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
        max_skipped_steps: steps skipped for a non-finite loss or gradient beyond this within
            ``skipped_window_steps`` steps end the job (defaults 10 and 1000).
        alarm_minutes: how long a health condition lasts before its alarm fires (default 15).
        state_machine_log_level: ``ALL`` (default: every state's start and end) or ``ERROR`` (failures only).
        log_execution_data: include each state's input and output in the log (default true).
        efs_throughput_alarm_percent: alarm when EFS throughput stays above this share of the permitted
            throughput for 5 minutes (default 80).
        capacity_wait_alarm_hours: e-mail the topic when a training job has waited this many hours for capacity
            (Starting, Pending or Interrupted: no host working; default 6, 1 to 672), or when the watchdog that
            measures it stops reporting (``infra/observability/capacity_alarm.py``).
        monthly_budget_usd: an AWS Budgets cost budget on the stage's ``stage`` tag that e-mails the topic at 80%
            of actual and 100% of forecast spend, in US dollars a month (default 1,000; 0: no budget).
        unsubscribed_reason: why a stage other than dev has no ``notification_email`` (at least 20 characters);
            without one such a stage is refused, since its alarms would reach nobody.
    """

    debugger: bool = False
    profiling_interval_ms: int = 500
    profile_start: int = 20
    profile_steps: int = 5
    gpu_underused_percent: int = HEALTH_DEFAULTS.gpu_underused_percent
    input_bound_percent: int = HEALTH_DEFAULTS.input_bound_percent
    loss_min_drop_percent: float = HEALTH_DEFAULTS.loss_min_drop_percent
    loss_window_steps: int = HEALTH_DEFAULTS.loss_window_steps
    stalled_minutes: int = HEALTH_DEFAULTS.stalled_minutes
    memory_percent: int = HEALTH_DEFAULTS.memory_percent
    max_skipped_steps: int = HEALTH_DEFAULTS.max_skipped_steps
    skipped_window_steps: int = HEALTH_DEFAULTS.skipped_window_steps
    alarm_minutes: int = 15
    state_machine_log_level: str = "ALL"
    log_execution_data: bool = True
    efs_throughput_alarm_percent: int = 80
    capacity_wait_alarm_hours: int = 6
    monthly_budget_usd: int = 1000
    unsubscribed_reason: str = ""

    def health_rules(self) -> dict[str, float | int]:
        """The thresholds train.py's health rules take (hyperparameter ``health_rules``)."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(HEALTH_DEFAULTS)}


@dataclasses.dataclass(frozen=True)
class SecurityConfig:
    """The compliance checks every synth must pass, and the Plan function's concurrency.

    Args:
        compliance_packs: the cdk-nag packs that run at synth, by class name without ``Checks``; an
            unacknowledged finding of any fails synthesis. ``AwsSolutions`` always; any of ``NIST80053R5``,
            ``HIPAASecurity``, ``PCIDSS321`` (default: all four).
        plan_reserved_concurrency: concurrent executions reserved for the Plan function, and its cap
            (default 0: none reserved). A reservation fails deployment in any account whose unreserved
            concurrency would drop below Lambda's minimum of 10 (new accounts start with a quota as low as 10).
        inter_container_encryption: encrypt the traffic between a training job's hosts (default true; AWS:
            it "can increase training time", more the more the hosts exchange: gradients every step).
        inter_container_encryption_off_reason: why a stage turns it off (required then, at least 20 characters).
    """

    compliance_packs: tuple[str, ...] = COMPLIANCE_PACKS
    plan_reserved_concurrency: int = 0
    inter_container_encryption: bool = True
    inter_container_encryption_off_reason: str = ""


@dataclasses.dataclass(frozen=True)
class StageConfig:
    """Everything one deployment of the stack is configured with.

    ``source_buckets``: buckets besides the stack's raw bucket that corpora and tokenizers may be read from, in
    this account or another (whose bucket policy must then admit the stack's execution and Plan roles); the jobs'
    role and the Plan function may then read them, and an isolated stage's S3 endpoint admits them.
    ``source_bucket_keys``: ARNs of the KMS keys those buckets' objects are encrypted with, when not the stack's
    own (the keys' policies must admit the same roles); the roles may decrypt with them through S3. The Plan step
    reads one file of each corpus source and refuses one encrypted with a key not listed here.

    Example:
        >>> from infra.config import load_stage_config
        >>> cfg = load_stage_config({"stage": "dev", "stages": {"dev": {"training": {"spot": False}}}})
        >>> cfg.training.spot
        False
    """

    name: str = "dev"
    account: str = PLACEHOLDER_ACCOUNT
    region: str = "us-east-1"
    notification_email: str | None = None
    source_buckets: tuple[str, ...] = ()
    source_bucket_keys: tuple[str, ...] = ()
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

    @property
    def job_prefix(self) -> str:
        """What every job, model, endpoint and the state machine of this stage is named from."""
        return f"gpt-{self.name}"

    @property
    def vpc_cidr(self) -> str:
        """``network.cidr``, else ``10.N.0.0/16`` with N from 32 to 231 drawn from the stage's name."""
        return self.network.cidr or default_cidr(self.name)


def default_cidr(stage: str) -> str:
    """A stage's default VPC range: the same for the same name everywhere, another for another name (mostly: the
    load checks the stages of cdk.json against each other)."""
    return f"10.{32 + int(hashlib.sha256(stage.encode()).hexdigest(), 16) % 200}.0.0/16"
