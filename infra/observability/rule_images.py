"""The SageMaker Debugger rule evaluator image of each region, resolved at synth time.

The SageMaker Python SDK holds this table (``sagemaker.core.debugger.get_rule_container_image_uri``, data in
``sagemaker/core/image_uri_config/debugger.json``), but installing the SDK here is not reasonable:
sagemaker-core 2.27 pins ``protobuf<7`` and ``rich<15`` (this environment has 7.x for TensorFlow 2.21 and
15.x for Keras) and pulls in about 25 packages, pandas and scipy among them, for one lookup. So this is the
project's own copy of that table, for the regions the stack supports (``infra.config.REGIONS``); a test
checks that every supported region has an entry.
"""

from __future__ import annotations

REPOSITORY = "sagemaker-debugger-rules"
TAG = "latest"

# ---- Copied from sagemaker-core 2.27.0, sagemaker/core/image_uri_config/debugger.json --------------------
RULE_REGISTRIES = {
    "ap-northeast-1": "430734990657",
    "ap-northeast-2": "578805364391",
    "ap-south-1": "904829902805",
    "ap-southeast-1": "972752614525",
    "ap-southeast-2": "184798709955",
    "ca-central-1": "519511493484",
    "eu-central-1": "482524230118",
    "eu-north-1": "314864569078",
    "eu-west-1": "929884845733",
    "eu-west-2": "250201462417",
    "us-east-1": "503895931360",
    "us-east-2": "915447279597",
    "us-west-2": "895741380848",
}
# ------------------------------------------------------------------------------------------------------------


def rule_evaluator_image(region: str) -> str:
    """The image that evaluates Debugger's built-in rules in ``region``.

    Raises:
        KeyError: for a region without an entry (the configuration's region check runs first).
    """
    return f"{RULE_REGISTRIES[region]}.dkr.ecr.{region}.amazonaws.com/{REPOSITORY}:{TAG}"
