"""The SDK's tables, as synth reads them: every supported region has every image; local storage refuses a key."""

from __future__ import annotations

import pytest

from infra.config import REGIONS
from infra.images import IMAGE_KEYS
from infra.sdk_tables import UnsupportedRegion, job_images, rule_evaluator_image, sdk_settings, without_volume_kms


@pytest.mark.parametrize("region", REGIONS)
def test_every_supported_region_has_the_jobs_images_and_the_rule_image(region: str):
    images = job_images(region)
    assert set(images) == set(IMAGE_KEYS)
    assert images["training-gpu"].endswith(f".dkr.ecr.{region}.amazonaws.com/tensorflow-training:2.21-gpu-py312")
    assert images["inference-cpu"].endswith(f".dkr.ecr.{region}.amazonaws.com/tensorflow-inference:2.20-cpu-py312")
    assert rule_evaluator_image(region).endswith(f".dkr.ecr.{region}.amazonaws.com/sagemaker-debugger-rules:latest")


def test_an_unknown_region_is_an_error_not_a_guess():
    with pytest.raises(UnsupportedRegion):
        job_images("mars-north-1")
    with pytest.raises(UnsupportedRegion):
        rule_evaluator_image("mars-north-1")


def test_types_with_local_storage_take_no_volume_key():
    assert without_volume_kms(["ml.g5.12xlarge", "ml.p4d.24xlarge", "ml.p3.16xlarge", "ml.m5.xlarge"]) == [
        "ml.g5.12xlarge",
        "ml.p4d.24xlarge",
    ]


def test_settings_rule_parameters_are_strings_as_the_api_wants():
    parameters = sdk_settings("us-east-1")["profiler_rule_parameters"]
    assert parameters["LowGPUUtilization"]["rule_to_invoke"] == "LowGPUUtilization"
    assert all(isinstance(v, str) for rule in parameters.values() for v in rule.values())
