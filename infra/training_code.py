"""The training package's contract with deploy time (``training/contract/``), loaded from its files.

``training/`` never imports infra and is shipped as is, so the few rules both sides need live there, in
modules that import nothing but the standard library (and each other not at all):

    hparams.py        the hyperparameter schema train.py's parser is built from (names, kinds, ranges)
    batch.py          the batch arithmetic (accumulation steps, pipeline passes)
    recipe.py         the learning-rate recipe and its departures from the preset's
    presets.py        the presets table (presets.json) and the per-block parameter formula
    health.py         the training health rules' thresholds and their defaults
    balance.py        the split of a model's blocks into pipeline stages
    network.py        NCCL's environment for EFA, and the rule on which network NCCL took
    formats.py        the corpus file formats preprocessing reads (the Plan step lists a corpus with it)
    sizes.py          sizes in bytes as preprocess.py reads them (the Plan step checks them before the job)

infra loads each by path under a private name (``training_code.hparams`` ...), so nothing of training/
lands on ``sys.path`` and synthesis never imports TensorFlow. The Plan function's bundle carries these
files in the same layout (``SHARED_FILES``).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TRAINING_ROOT = Path(__file__).resolve().parent.parent / "training"
SHARED_NAMES = ("hparams", "batch", "recipe", "presets", "health", "balance", "network", "formats", "sizes")
SHARED_MODULES = {name: f"contract/{name}.py" for name in SHARED_NAMES}
SHARED_FILES = (*SHARED_MODULES.values(), "contract/presets.json")


@functools.cache
def training_module(name: str) -> ModuleType:
    """One of ``SHARED_MODULES``, e.g. ``training_module("hparams").SCHEMA``."""
    qualified = f"training_code.{name}"
    spec = importlib.util.spec_from_file_location(qualified, TRAINING_ROOT / SHARED_MODULES[name])
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module
