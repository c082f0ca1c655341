"""Limits that AWS sets on the requests the workflow makes, read from botocore's SageMaker service model.

botocore's model is what the AWS SDKs validate against, maintained by AWS with every API change, so no
limit here is a hand copy: which instance types each API accepts (training, processing, hosting), the
Processing instance count and volume size, the size of the HyperParameters map, of a container argument and of
the lists of container arguments, processing inputs and metric definitions.

The Plan step runs where botocore may differ from the one synthesis saw (and its run-time code uses the
standard library only), so synthesis writes the limits it read into the Plan function's bundle
(``write_limits``) and the function reads that file (``LIMITS_FILE``).

S3's object size limit (5 TiB) is not in any service model; it is from the S3 user guide. MaxRuntime's 28 days
are in the model's documentation text only, not in its constraints.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

LIMITS_FILE = Path(__file__).with_name("aws_limits.json")
S3_MAX_OBJECT_MB = 5 * 1024 * 1024  # 5 TiB (Amazon S3 user guide, "Uploading objects")
# StoppingCondition.MaxRuntimeInSeconds: "The maximum value is 28 days." (botocore's documentation of the member;
# the shape itself has no max).
SAGEMAKER_MAX_RUN_HOURS = 28 * 24
# "The maximum time that a TrainingJob can run in total, including any time spent publishing metrics or archiving and
# uploading models after it has been stopped, is 30 days." (the same text): a stopped job may take 2 days more.
SAGEMAKER_UPLOAD_HOURS = 30 * 24 - SAGEMAKER_MAX_RUN_HOURS


@dataclasses.dataclass(frozen=True)
class AwsLimits:
    """What the SageMaker API accepts, by botocore shape name in the comments."""

    training_instance_types: tuple[str, ...]  # TrainingInstanceType
    processing_instance_types: tuple[str, ...]  # ProcessingInstanceType
    hosting_instance_types: tuple[str, ...]  # ProductionVariantInstanceType
    processing_instance_count: tuple[int, int]  # ProcessingInstanceCount (min, max)
    processing_volume_gb: tuple[int, int]  # ProcessingVolumeSizeInGB (min, max)
    hyperparameters: int  # HyperParameters (max entries)
    hyperparameter_key_chars: int  # HyperParameterKey (max length)
    hyperparameter_value_chars: int  # HyperParameterValue (max length)
    container_argument_chars: int  # ContainerArgument (max length)
    container_arguments: int  # ContainerArguments (max entries)
    processing_inputs: int  # ProcessingInputs (max entries)
    metric_definitions: int  # MetricDefinitionList (max entries)


def from_botocore() -> AwsLimits:
    """The limits in the installed botocore's SageMaker model."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")

    def meta(shape: str) -> dict:
        return model.shape_for(shape).metadata

    def span(shape: str) -> tuple[int, int]:
        return meta(shape)["min"], meta(shape)["max"]

    return AwsLimits(
        training_instance_types=tuple(model.shape_for("TrainingInstanceType").enum),
        processing_instance_types=tuple(model.shape_for("ProcessingInstanceType").enum),
        hosting_instance_types=tuple(model.shape_for("ProductionVariantInstanceType").enum),
        processing_instance_count=span("ProcessingInstanceCount"),
        processing_volume_gb=span("ProcessingVolumeSizeInGB"),
        hyperparameters=meta("HyperParameters")["max"],
        hyperparameter_key_chars=meta("HyperParameterKey")["max"],
        hyperparameter_value_chars=meta("HyperParameterValue")["max"],
        container_argument_chars=meta("ContainerArgument")["max"],
        container_arguments=meta("ContainerArguments")["max"],
        processing_inputs=meta("ProcessingInputs")["max"],
        metric_definitions=meta("MetricDefinitionList")["max"],
    )


def write_limits(path: Path) -> None:
    """Writes botocore's limits where the Plan function's code reads them (``LIMITS_FILE`` in its bundle)."""
    path.write_text(json.dumps(dataclasses.asdict(from_botocore())))


@functools.cache
def aws_limits() -> AwsLimits:
    """The bundled limits in the Plan function; botocore's wherever it is installed (synthesis, tests, local runs)."""
    if not LIMITS_FILE.is_file():
        return from_botocore()
    data = json.loads(LIMITS_FILE.read_text())
    return AwsLimits(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
