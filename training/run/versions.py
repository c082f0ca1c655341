"""The TensorFlow and Keras this package was tested with, checked before anything else runs.

The optimizer overrides private Keras methods (``trainer.AdamW``: ``_distributed_tf_update_step``,
``_all_reduce_sum_gradients``) and the layers use private TensorFlow APIs, which change between releases without
notice. The container's Keras is whatever its image ships (the TensorFlow 2.21 image asks only ``keras>=3.15.0``),
so ``requirements.txt`` pins the tests' Keras, which the SageMaker toolkit installs when the job starts, and the job
refuses another in one line rather than fail, or train differently, hours in.
"""

from __future__ import annotations

import re
from pathlib import Path

import keras
import tensorflow as tf

TENSORFLOW = "2.21"  # the training image's release (infra/images.py) and the tests' (requirements-dev.txt)
REQUIREMENTS = Path(__file__).parents[1] / "requirements.txt"


class UntestedVersion(RuntimeError):
    """TensorFlow or Keras is not the release this package was tested with."""


def pinned(package: str, requirements: Path = REQUIREMENTS) -> str:
    """The version ``requirements`` pins ``package`` to (``keras==3.15.1`` -> "3.15.1")."""
    match = re.search(rf"^{re.escape(package)}==(\S+)", requirements.read_text(), re.M)
    if match is None:
        raise UntestedVersion(f"{requirements} pins no {package}")
    return match.group(1)


def check_versions(tensorflow: str = tf.__version__, keras_version: str = keras.__version__) -> None:
    """Raises UntestedVersion naming the package, both versions and the fix."""
    if not tensorflow.startswith(TENSORFLOW + "."):
        raise UntestedVersion(
            f"TensorFlow {tensorflow} is not the {TENSORFLOW} this package was tested with: use the TensorFlow "
            f"{TENSORFLOW} training image"
        )
    expected = pinned("keras")
    if keras_version != expected:
        raise UntestedVersion(
            f"Keras {keras_version} is not the {expected} this package was tested with (training/requirements.txt): "
            f"install keras=={expected} (the job does, from requirements.txt, unless that file was changed)"
        )
