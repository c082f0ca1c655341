"""The preprocessing jobs' requests: the tokenizer job and the shards job (SageMaker Processing).

Like ``requests.py``'s builders, plain functions returning the top-level fields of ``PROCESSING_FIELDS``.
"""

from __future__ import annotations

from typing import Any

from infra.plan_step.container import processing_entrypoint
from infra.plan_step.execution_input import WorkflowInput, comma_names
from infra.plan_step.hyperparameters import ENTRY_POINTS
from infra.plan_step.requests import (
    PREPROCESS_HOURS,
    dataset_uri,
    image_uri,
    job_tags,
    tokenizer_dir_uri,
    volume_key,
)
from infra.plan_step.settings import StackSettings
from infra.plan_step.sources import corpus_sources
from infra.training_code import container_arguments

PROCESSING_FIELDS = (
    "ProcessingJobName",
    "RoleArn",
    "AppSpecification",
    "ProcessingInputs",
    "ProcessingOutputConfig",
    "ProcessingResources",
    "StoppingCondition",
    "NetworkConfig",
    "Environment",
    "Tags",
)
PROCESSING_BASE = "/opt/ml/processing"
# The processing container is the TensorFlow image; it gets the package the way script mode does:
# unpack sourcedir.tar.gz, install its requirements, run the entry point with the job's arguments.
PROCESSING_COMMAND = [
    "/bin/bash",
    "-c",
    "set -euo pipefail; mkdir -p /opt/ml/code; tar -xzf /opt/ml/processing/input/code/* -C /opt/ml/code; "
    "cd /opt/ml/code; python -m pip install --quiet -r requirements.txt; "
    f'exec python {ENTRY_POINTS["preprocess"]} "$@"',
    "preprocess",
]


def _s3_input(name: str, uri: str, local: str, *, data_type: str = "S3Prefix", sharded: bool = False) -> dict:
    return {
        "InputName": name,
        "S3Input": {
            "S3Uri": uri,
            "LocalPath": f"{PROCESSING_BASE}/input/{local}",
            "S3DataType": data_type,
            "S3InputMode": "File",
            "S3DataDistributionType": "ShardedByS3Key" if sharded else "FullyReplicated",
        },
    }


def _processing_job(
    settings: StackSettings,
    inp: WorkflowInput,
    name: str,
    arguments: list[str],
    inputs: list[dict],
    output_uri: str,
    instance_count: int,
) -> dict[str, Any]:
    pre = inp.preprocessing
    return {
        "ProcessingJobName": name,
        "RoleArn": settings.role_arn,
        "AppSpecification": {
            "ImageUri": image_uri(settings, "training", pre.instance_type),
            "ContainerEntrypoint": processing_entrypoint(PROCESSING_COMMAND),
            "ContainerArguments": arguments,
        },
        "ProcessingInputs": [_s3_input("code", settings.source_dir_uri, "code", data_type="S3Prefix"), *inputs],
        "ProcessingOutputConfig": {
            "Outputs": [
                {
                    "OutputName": "dataset",
                    "S3Output": {
                        "S3Uri": output_uri,
                        "LocalPath": f"{PROCESSING_BASE}/output/dataset",
                        "S3UploadMode": "EndOfJob",
                    },
                }
            ],
            "KmsKeyId": settings.kms_key_arn,
        },
        "ProcessingResources": {
            "ClusterConfig": {
                "InstanceCount": instance_count,
                "InstanceType": pre.instance_type,
                "VolumeSizeInGB": pre.volume_size_gb,
                **volume_key(settings, pre.instance_type),
            }
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": PREPROCESS_HOURS * 3600},
        "NetworkConfig": {
            "EnableInterContainerTrafficEncryption": True,
            "VpcConfig": {"SecurityGroupIds": settings.security_group_ids, "Subnets": settings.subnet_ids},
        },
        "Environment": {"PYTHONUNBUFFERED": "1"},
        "Tags": job_tags(settings),
    }


def _source_options(inp: WorkflowInput) -> dict[str, Any]:
    """The corpus's text field and Pile subsets, or a mix's sources (``--source=NAME:WEIGHT``, each one's field
    and subsets); the table writes a repeatable option one argument a value."""
    corpus = inp.corpus
    if not corpus.sources:
        return {"text_field": corpus.text_field, "pile_set_names": corpus.pile_sets()}
    return {
        "text_field": corpus.text_field,
        "source": [(s.name, s.weight) for s in corpus.sources],
        "source_text_field": [(s.name, s.text_field) for s in corpus.sources if s.text_field],
        "source_pile_set_names": [(s.name, name) for s in corpus.sources for name in comma_names(s.pile_set_names)],
    }


def _raw_inputs(settings: StackSettings, inp: WorkflowInput, uris: dict[str, str], **kind: Any) -> list[dict]:
    """One input a source: ``raw`` at input/raw, or a mix's ``raw-<name>`` at input/raw/<name>."""
    return [
        _s3_input(
            f"raw-{source.name}" if source.name else "raw", uris[source.name], f"raw/{source.name}".rstrip("/"), **kind
        )
        for _, source in corpus_sources(settings, inp)
    ]


def tokenizer_job_request(
    settings: StackSettings, inp: WorkflowInput, name: str, sample_manifests: dict[str, str]
) -> dict:
    """One instance trains the BPE tokenizer on a sample of the corpus (each source's files listed in its manifest)."""
    pre = inp.preprocessing
    arguments = container_arguments(
        "tokenizer",
        {
            "input_dir": f"{PROCESSING_BASE}/input/raw",
            "output_dir": f"{PROCESSING_BASE}/output/dataset",
            "vocab_size": pre.vocab_size,
            "sample_bytes": inp.corpus.tokenizer_sample_bytes,
            **_source_options(inp),
        },
    )
    raw = _raw_inputs(settings, inp, sample_manifests, data_type="ManifestFile")
    output = tokenizer_dir_uri(settings, inp).rsplit("/", 1)[0] + "/"
    return _processing_job(settings, inp, name, arguments, raw, output, instance_count=1)


def shards_job_request(settings: StackSettings, inp: WorkflowInput, name: str) -> dict:
    """N instances tokenize their share of the corpus files (each source's, ShardedByS3Key) into token shards."""
    pre = inp.preprocessing
    arguments = container_arguments(
        "shards",
        {
            "input_dir": f"{PROCESSING_BASE}/input/raw",
            "tokenizer_dir": f"{PROCESSING_BASE}/input/tokenizer",
            "output_dir": f"{PROCESSING_BASE}/output/dataset",
            "sequence_length": inp.training.sequence_length,
            "shard_size_mb": pre.shard_size_mb,
            "validation_fraction": pre.validation_fraction,
            **_source_options(inp),
        },
    )
    prefixes = {source.name: source.s3_uri for _, source in corpus_sources(settings, inp)}
    inputs = [
        *_raw_inputs(settings, inp, prefixes, sharded=True),
        _s3_input("tokenizer", tokenizer_dir_uri(settings, inp), "tokenizer"),
    ]
    return _processing_job(
        settings, inp, name, arguments, inputs, dataset_uri(settings, inp), instance_count=pre.instance_count
    )
