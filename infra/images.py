"""The jobs' container images: which TensorFlow Deep Learning Containers, and how settings name them.

The URIs themselves come from the SageMaker SDK's table at synth (``infra/sdk_tables.py``); this module is
standard library only, so the Plan function picks an image by key from its settings.
"""

from __future__ import annotations

import re

TENSORFLOW_VERSION = "2.21"  # training and processing
SERVING_VERSION = "2.20"  # TensorFlow Serving: the newest the SDK knows; it serves SavedModels of 2.21
PYTHON_VERSION = "py312"
IMAGE_KEYS = ("training-cpu", "training-gpu", "inference-cpu", "inference-gpu")


def image_key(scope: str, *, gpu: bool) -> str:
    """``training`` or ``inference``, CPU or GPU: the image's key in ``StackSettings.images``."""
    return f"{scope}-{'gpu' if gpu else 'cpu'}"


def repository_arn(image_uri: str) -> str:
    """The ECR repository an image URI names: ``<account>.dkr.ecr.<region>.<suffix>/<repo>:<tag>``."""
    registry, _, rest = image_uri.partition("/")
    account, _, _, region, *_ = registry.split(".")
    partition = "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"
    repository = re.split(r"[:@]", rest)[0]  # a tag (:2.21-gpu-py312) or a digest (@sha256:...)
    return f"arn:{partition}:ecr:{region}:{account}:repository/{repository}"
