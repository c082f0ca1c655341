"""Container images of the jobs: AWS Deep Learning Containers for TensorFlow 2.21.

The SageMaker Python SDK's image table stops at TensorFlow 2.19 (it raises "Unsupported tensorflow
version" for 2.21), so this is the project's own table, kept to what AWS publishes
(see ../shared/reference/aws-facts.md). Update it here, and only here, for a new release.
"""

from __future__ import annotations

DLC_ACCOUNT = "763104351884"  # the Deep Learning Containers registry in every commercial region
TENSORFLOW_VERSION = "2.21.0"
PYTHON_TAG = "py312"

# ---- Our table (not in the SageMaker SDK) ------------------------------------------------------
TRAINING_TAGS = {
    "gpu": f"{TENSORFLOW_VERSION}-gpu-{PYTHON_TAG}-cu129-amzn2023-sagemaker",
    "cpu": f"{TENSORFLOW_VERSION}-cpu-{PYTHON_TAG}-amzn2023-sagemaker",
}
# TensorFlow Serving images lag the training images; 2.19 serves SavedModels exported by 2.21
# (the SavedModel format is stable across these versions). Not confirmed for every region: check
# the Deep Learning Containers release notes before changing the region.
INFERENCE_TAGS = {"gpu": "2.19.0-gpu", "cpu": "2.19.0-cpu"}
# ------------------------------------------------------------------------------------------------


def _uri(repository: str, region: str, tag: str) -> str:
    return f"{DLC_ACCOUNT}.dkr.ecr.{region}.amazonaws.com/{repository}:{tag}"


def training_image(region: str, *, gpu: bool) -> str:
    """The TensorFlow training image, e.g. for processing (CPU) and training (GPU) jobs."""
    return _uri("tensorflow-training", region, TRAINING_TAGS["gpu" if gpu else "cpu"])


def inference_image(region: str, *, gpu: bool) -> str:
    """The TensorFlow Serving image for the endpoint."""
    return _uri("tensorflow-inference", region, INFERENCE_TAGS["gpu" if gpu else "cpu"])
