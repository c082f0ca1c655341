"""What the SageMaker Python SDK maintains, resolved at synth: image URIs, Debugger's rules, volume encryption.

sagemaker-core (the v3 SDK's core) keeps the tables: the Deep Learning Containers' images with each region's
registry account, the Debugger rule evaluator image of each region and the built-in rules' parameters, and which
instance types have local (NVMe) storage, where SageMaker refuses a volume KMS key. Synth resolves them here
and hands the values to the Plan function through its settings: that function stays standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable

from sagemaker.core import image_uris
from sagemaker.core.common_utils import instance_supports_kms
from sagemaker.core.debugger.debugger import ProfilerRule, get_rule_container_image_uri, rule_configs

from infra.images import IMAGE_KEYS, PYTHON_VERSION, SERVING_VERSION, TENSORFLOW_VERSION, image_key
from infra.instances import INSTANCE_TYPES
from infra.plan_step import debugger

# An instance type of each kind, for the SDK's choice of the CPU or GPU image.
_EXAMPLE_TYPE = {False: "ml.c5.xlarge", True: "ml.g5.xlarge"}


class UnsupportedRegion(ValueError):
    """The SDK knows no image of this project's jobs in the region."""


def job_images(region: str) -> dict[str, str]:
    """Every image the jobs use in ``region``, by :func:`infra.images.image_key`.

    Raises:
        UnsupportedRegion: the SDK has no such image there.
    """
    images = {}
    for scope, version in (("training", TENSORFLOW_VERSION), ("inference", SERVING_VERSION)):
        for gpu in (False, True):
            try:
                uri = image_uris.retrieve(
                    "tensorflow",
                    region=region,
                    version=version,
                    py_version=PYTHON_VERSION,
                    instance_type=_EXAMPLE_TYPE[gpu],
                    image_scope=scope,
                )
            except ValueError as error:
                raise UnsupportedRegion(f"no TensorFlow {version} {scope} image in {region}: {error}") from error
            images[image_key(scope, gpu=gpu)] = uri
    assert set(images) == set(IMAGE_KEYS)
    return images


def rule_evaluator_image(region: str) -> str:
    """The image that evaluates Debugger's built-in rules in ``region``."""
    try:
        return get_rule_container_image_uri("ProfilerReport", region)
    except (KeyError, ValueError) as error:
        raise UnsupportedRegion(f"no SageMaker Debugger rule image in {region}: {error}") from error


def profiler_rule_parameters(names: Iterable[str]) -> dict[str, dict[str, str]]:
    """The SDK's ``RuleParameters`` of each built-in profiler rule (``rule_to_invoke`` and its defaults), as the
    SDK sends them: strings (its ``rule_parameters`` attribute holds numbers, which the API refuses)."""
    return {
        name: ProfilerRule.sagemaker(getattr(rule_configs, name)()).to_profiler_rule_config_dict()["RuleParameters"]
        for name in names
    }


def without_volume_kms(instance_types: Iterable[str]) -> list[str]:
    """The types with local instance storage, where SageMaker refuses ``VolumeKmsKeyId`` (and an endpoint's
    ``KmsKeyId``): their NVMe volumes are encrypted by the instance's hardware instead."""
    return sorted(t for t in instance_types if not instance_supports_kms(t))


def sdk_settings(region: str) -> dict:
    """The :class:`~infra.plan_step.settings.StackSettings` fields that come from the SDK, for ``region``."""
    return {
        "rule_evaluator_image": rule_evaluator_image(region),
        "profiler_rule_parameters": profiler_rule_parameters(debugger.PROFILER_RULES),
        "images": job_images(region),
        "without_volume_kms": without_volume_kms(INSTANCE_TYPES),
    }
