"""Request builders: an execution's validated input in, the SageMaker API request dictionaries out.

Plain functions, so tests call them directly and the Plan function calls the very same code. The
state machine passes each request whole to the SageMaker integration; every builder returns the
top-level fields of its ``*_FIELDS`` below (an optional one only where it applies). Here: the training
job, the model and its endpoint, and what every job shares (image, volume key, tags, time limits); the
preprocessing jobs' requests are ``processing_requests.py``, the training job's hyperparameters
``hyperparameters.py``.
"""

from __future__ import annotations

from infra.aws_limits import SAGEMAKER_MAX_RUN_HOURS, SAGEMAKER_UPLOAD_HOURS
from infra.config import MAX_SPOT_WAIT_HOURS
from infra.images import TENSORFLOW_VERSION, image_key
from infra.instances import INSTANCE_TYPES
from infra.plan_step import debugger
from infra.plan_step.container import training_container
from infra.plan_step.execution_input import WorkflowInput
from infra.plan_step.hyperparameters import CHECKPOINT_DIR, TENSORBOARD_DIR, training_hyperparameters
from infra.plan_step.metric_definitions import metric_definitions
from infra.plan_step.settings import StackSettings
from infra.training_code import training_module

TRAINING_FIELDS = (
    "TrainingJobName",
    "RoleArn",
    "AlgorithmSpecification",
    "HyperParameters",
    "InputDataConfig",
    "OutputDataConfig",
    "ResourceConfig",
    "VpcConfig",
    "StoppingCondition",
    "EnableManagedSpotTraining",
    "CheckpointConfig",
    "RetryStrategy",
    "EnableInterContainerTrafficEncryption",
    "TensorBoardOutputConfig",
    "Environment",
    "Tags",
    # Only with observability.debugger (debugger.py); the last two only for an image with smdebug.
    "ProfilerConfig",
    "ProfilerRuleConfigurations",
    "DebugHookConfig",
    "DebugRuleConfigurations",
)
MODEL_FIELDS = ("ModelName", "ExecutionRoleArn", "PrimaryContainer", "VpcConfig", "Tags")
ENDPOINT_CONFIG_FIELDS = ("EndpointConfigName", "ProductionVariants", "KmsKeyId", "Tags")
ENDPOINT_FIELDS = ("EndpointName", "EndpointConfigName", "Tags")
ENDPOINT_UPDATE_FIELDS = ("EndpointName", "EndpointConfigName")

REPORT_FILE = "training-report.html"  # what train.py writes into TENSORBOARD_DIR (training/observe/report.py)
PREPROCESS_HOURS = 24
# How long a job's Task state waits before it times out (ASL's default is 60 s): longer than the job may take, so
# that SageMaker's own limits end a job first. Processing: its MaxRuntime, plus an hour. Training: the longest
# MaxWait a spot job may have, plus the upload SageMaker allows after it stops a job (SAGEMAKER_UPLOAD_HOURS).
TASK_TIMEOUT_SECONDS = {
    "tokenizer": PREPROCESS_HOURS * 3600 + 3600,
    "shards": PREPROCESS_HOURS * 3600 + 3600,
    "training": (SAGEMAKER_MAX_RUN_HOURS + MAX_SPOT_WAIT_HOURS + SAGEMAKER_UPLOAD_HOURS) * 3600,
}


def dataset_uri(settings: StackSettings, inp: WorkflowInput) -> str:
    return f"s3://{settings.datasets_bucket}/datasets/{inp.dataset.name}/"


def tokenizer_dir_uri(settings: StackSettings, inp: WorkflowInput) -> str:
    if inp.dataset.tokenizer_s3_uri:
        return inp.dataset.tokenizer_s3_uri
    return f"s3://{settings.datasets_bucket}/tokenizers/{inp.dataset.name}/tokenizer.json"


def corpus_uri(settings: StackSettings, inp: WorkflowInput) -> str:
    return inp.corpus.s3_uri or f"s3://{settings.raw_bucket}/"


def image_uri(settings: StackSettings, scope: str, instance_type: str) -> str:
    return settings.images[image_key(scope, gpu=INSTANCE_TYPES[instance_type].is_gpu)]


def volume_key(settings: StackSettings, instance_type: str, field: str = "VolumeKmsKeyId") -> dict[str, str]:
    """The data key for the instances' storage volumes, where SageMaker accepts one: types with local NVMe
    storage refuse it (their instance storage is encrypted by the instance's hardware)."""
    return {} if instance_type in settings.without_volume_kms else {field: settings.kms_key_arn}


def job_tags(settings: StackSettings) -> list[dict[str, str]]:
    return [{"Key": "project", "Value": "gpt-pretraining"}, {"Key": "stage", "Value": settings.stage["name"]}]


def training_environment(settings: StackSettings, inp: WorkflowInput) -> dict[str, str]:
    """The job's environment: NCCL over EFA as AWS sets it for the instance type (``training/contract/network.py``
    cites where), and NCCL's network choice logged for the health rule that stops a job on sockets."""
    return {"PYTHONUNBUFFERED": "1", **training_module("network").nccl_environment(inp.training.instance_type)}


def _training_channels(settings: StackSettings, inp: WorkflowInput) -> list[dict]:
    """The dataset folder (manifest, tokenizer, train/ and validation/ shards) as the ``train`` channel."""
    if inp.training.data_source == "efs":
        source = {
            "FileSystemDataSource": {
                "FileSystemId": settings.file_system_id,
                "FileSystemType": "EFS",
                "DirectoryPath": f"{settings.efs_datasets_path}/{inp.dataset.name}",
                "FileSystemAccessMode": "ro",
            }
        }
        return [{"ChannelName": "train", "DataSource": source, "InputMode": "File"}]
    source = {
        "S3DataSource": {
            "S3DataType": "S3Prefix",
            "S3Uri": dataset_uri(settings, inp),
            "S3DataDistributionType": "FullyReplicated",
        }
    }
    return [{"ChannelName": "train", "DataSource": source, "InputMode": "FastFile"}]


def training_output_uri(settings: StackSettings) -> str:
    """Training ``S3OutputPath``: a job writes ``<job>/output/``, ``<job>/profiler-output/``, ``<job>/rule-output/``."""
    return f"s3://{settings.models_bucket}/training/"


def tensorboard_uri(settings: StackSettings, training_job_name: str) -> str:
    """Where TensorBoardOutputConfig uploads the job's TensorBoard folder: next to its model."""
    return f"{training_output_uri(settings)}{training_job_name}/tensorboard/"


def training_job_request(settings: StackSettings, inp: WorkflowInput, name: str, run_name: str) -> dict:
    """The distributed training job: script mode on the TF 2.21 image, data on EFS (or S3), spot, checkpoints,
    TensorBoard output; Debugger's system profiling and profiler rules with ``observability.debugger``."""
    train = inp.training
    max_run = train.max_run_hours * 3600
    output_uri = training_output_uri(settings)
    observability = settings.stage_config.observability
    return {
        "TrainingJobName": name,
        "RoleArn": settings.role_arn,
        "AlgorithmSpecification": {
            "TrainingImage": train.image_uri or image_uri(settings, "training", train.instance_type),
            "TrainingInputMode": "File",
            "MetricDefinitions": metric_definitions([source.name for source in inp.corpus.sources]),
            "EnableSageMakerMetricsTimeSeries": True,
            **training_container(train.image_forwards_signals),
        },
        "HyperParameters": training_hyperparameters(settings, inp),
        "InputDataConfig": _training_channels(settings, inp),
        "OutputDataConfig": {"S3OutputPath": output_uri, "KmsKeyId": settings.kms_key_arn},
        "ResourceConfig": {
            "InstanceType": train.instance_type,
            "InstanceCount": train.instance_count,
            "VolumeSizeInGB": train.volume_size_gb,
            **volume_key(settings, train.instance_type),
        },
        "VpcConfig": {"SecurityGroupIds": settings.security_group_ids, "Subnets": settings.subnet_ids},
        # Spot's MaxWait is the whole time the job may take, running and waiting for capacity (at the start and
        # after each interruption) together: MaxRuntime plus spot_wait_hours of waiting in all.
        "StoppingCondition": {
            "MaxRuntimeInSeconds": max_run,
            **({"MaxWaitTimeInSeconds": max_run + train.spot_wait_hours * 3600} if train.spot else {}),
        },
        "EnableManagedSpotTraining": train.spot,
        "CheckpointConfig": {"S3Uri": f"s3://{settings.checkpoints_bucket}/{run_name}/", "LocalPath": CHECKPOINT_DIR},
        "RetryStrategy": {"MaximumRetryAttempts": 2},
        # On unless the stage turns it off with a reason (security.inter_container_encryption): AWS documents
        # that it "can increase training time, especially ... distributed deep learning" (train-encrypt.html).
        "EnableInterContainerTrafficEncryption": settings.stage_config.security.inter_container_encryption,
        **debugger.debugger_fields(
            observability.debugger,
            TENSORFLOW_VERSION,
            output_uri,
            observability.profiling_interval_ms,
            settings.rule_evaluator_image,
            settings.profiler_rule_parameters,
        ),
        "TensorBoardOutputConfig": {"S3OutputPath": tensorboard_uri(settings, name), "LocalPath": TENSORBOARD_DIR},
        "Environment": training_environment(settings, inp),
        "Tags": job_tags(settings),
    }


def model_artifact_uri(settings: StackSettings, training_job_name: str) -> str:
    """Where SageMaker puts the trained model: ``<S3OutputPath><job>/output/model.tar.gz``."""
    return f"{training_output_uri(settings)}{training_job_name}/output/model.tar.gz"


def profiler_report_uri(settings: StackSettings, training_job_name: str) -> str:
    """Where Debugger's ProfilerReport rule writes its HTML report for a training job."""
    return debugger.profiler_report_uri(training_output_uri(settings), training_job_name)


def training_report_uri(settings: StackSettings, training_job_name: str) -> str:
    """The project's own report (health verdicts and plots), uploaded with the job's TensorBoard folder."""
    return tensorboard_uri(settings, training_job_name) + REPORT_FILE


def model_request(settings: StackSettings, inp: WorkflowInput, name: str, training_job_name: str) -> dict:
    return {
        "ModelName": name,
        "ExecutionRoleArn": settings.role_arn,
        "PrimaryContainer": {
            "Image": image_uri(settings, "inference", inp.deploy.instance_type),
            "ModelDataUrl": model_artifact_uri(settings, training_job_name),
        },
        "VpcConfig": {"SecurityGroupIds": settings.security_group_ids, "Subnets": settings.subnet_ids},
        "Tags": job_tags(settings),
    }


def endpoint_config_request(settings: StackSettings, inp: WorkflowInput, name: str, model_name: str) -> dict:
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": model_name,
        "InstanceType": inp.deploy.instance_type,
        "InitialInstanceCount": inp.deploy.instance_count,
    }
    return {
        "EndpointConfigName": name,
        "ProductionVariants": [variant],
        **volume_key(settings, inp.deploy.instance_type, "KmsKeyId"),
        "Tags": job_tags(settings),
    }


def endpoint_request(settings: StackSettings, name: str, config_name: str) -> dict:
    return {"EndpointName": name, "EndpointConfigName": config_name, "Tags": job_tags(settings)}


def endpoint_update_request(name: str, config_name: str) -> dict:
    """The stage's endpoint, which exists, to serve ``config_name``: SageMaker's blue/green update, the old
    instances serving until the new ones are in service (and left serving if they fail: it rolls back)."""
    return {"EndpointName": name, "EndpointConfigName": config_name}
