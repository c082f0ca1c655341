"""Every job's container starts with the init in front of the image's entrypoint, within SageMaker's limits."""

from __future__ import annotations

import dataclasses

import botocore.session
import pytest

from infra.config import ConfigError
from infra.plan_step import processing_requests, requests
from infra.plan_step.container import IMAGE_ENTRYPOINT, INIT_COMMAND
from infra.plan_step.execution_input import parse_input

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gpt:1"


def with_training(settings, **fields):
    """The settings with some ``training`` values of the stage changed."""
    stage = {**settings.stage, "training": {**settings.stage["training"], **fields}}
    return dataclasses.replace(settings, stage=stage)


def all_requests(settings) -> list[tuple[str, str, dict]]:
    """(operation, specification member, its value) of every job the workflow starts."""
    inp = parse_input({}, settings.stage_config)
    return [
        ("CreateTrainingJob", "AlgorithmSpecification", requests.training_job_request(settings, inp, "j-trn", "run")),
        (
            "CreateProcessingJob",
            "AppSpecification",
            processing_requests.tokenizer_job_request(settings, inp, "j-tok", {"": "s3://b/m"}),
        ),
        ("CreateProcessingJob", "AppSpecification", processing_requests.shards_job_request(settings, inp, "j-shd")),
    ]


def test_every_command_fits_botocores_limits(settings):
    model = botocore.session.get_session().get_service_model("sagemaker")
    for operation, member, request in all_requests(settings):
        shape = model.operation_model(operation).input_shape.members[member]
        for name in ("ContainerEntrypoint", "ContainerArguments"):
            limits, items = shape.members[name], request[member][name]
            assert limits.metadata["min"] <= len(items) <= limits.metadata["max"], (operation, name)
            assert all(len(item) <= limits.member.metadata["max"] for item in items), (operation, name)


def test_the_init_runs_the_images_own_entrypoint_as_sagemaker_would(settings):
    (_, _, training), (_, _, tokenizer), _ = all_requests(settings)
    spec = training["AlgorithmSpecification"]
    assert spec["ContainerEntrypoint"] == INIT_COMMAND
    assert spec["ContainerArguments"] == [*IMAGE_ENTRYPOINT, "train"]
    command = tokenizer["AppSpecification"]["ContainerEntrypoint"]
    assert command[: len(INIT_COMMAND) + len(IMAGE_ENTRYPOINT)] == [*INIT_COMMAND, *IMAGE_ENTRYPOINT]


def test_a_custom_image_gets_the_init_unless_its_stage_says_it_forwards_signals(settings):
    custom = with_training(settings, image_uri=IMAGE)
    spec = requests.training_job_request(custom, parse_input({}, custom.stage_config), "j", "r")
    assert spec["AlgorithmSpecification"]["ContainerEntrypoint"] == INIT_COMMAND
    forwarding = with_training(settings, image_uri=IMAGE, image_forwards_signals=True)
    spec = requests.training_job_request(forwarding, parse_input({}, forwarding.stage_config), "j", "r")
    assert {"ContainerEntrypoint", "ContainerArguments"}.isdisjoint(spec["AlgorithmSpecification"])


def test_only_a_custom_image_may_forward_signals_and_only_its_stage_says_so(settings):
    forwarding = {"training": {"image_forwards_signals": True}}
    with pytest.raises(ConfigError, match=r"training\.image_forwards_signals: True is not valid; expected false"):
        parse_input(forwarding, settings.stage_config)
    with pytest.raises(ConfigError, match=r"training\.image_forwards_signals: True is not valid; expected the stage's"):
        parse_input(forwarding, with_training(settings, image_uri=IMAGE).stage_config)
