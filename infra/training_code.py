"""infra's one door into the training package's contract (``training/contract/``): its modules, loaded from
their files, and the few views infra takes of them (a preset's shape, a configuration's recipe,
a processing job's arguments).

``training/`` never imports infra and is shipped as is, so the few rules both sides need live there, in
modules that import nothing but the standard library (and each other not at all):

    hparams.py        the hyperparameter schema train.py's parser is built from (names, kinds, ranges)
    batch.py          the batch arithmetic (replicas, accumulation steps, pipeline passes)
    recipe.py         the learning-rate recipe and its departures from the preset's
    presets.py        the presets table (presets.json) and the per-block parameter formula
    health.py         the training health rules' thresholds and their defaults
    balance.py        the split of a model's blocks into pipeline stages
    network.py        NCCL's environment for EFA, and the rule on which network NCCL took
    formats.py        the corpus file formats preprocessing reads (the Plan step lists a corpus with it)
    sizes.py          sizes in bytes as preprocess.py reads them (the Plan step checks them before the job)
    preprocess_options.py  preprocess.py's options (the Plan step writes the processing jobs' arguments with them)

infra loads each by path under a private name (``training_code.hparams`` ...), so nothing of training/
lands on ``sys.path`` and synthesis never imports TensorFlow. The Plan function's bundle carries these
files in the same layout (``SHARED_FILES``).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

TRAINING_ROOT = Path(__file__).resolve().parent.parent / "training"
SHARED_NAMES = (
    "hparams",
    "batch",
    "recipe",
    "presets",
    "health",
    "balance",
    "network",
    "formats",
    "sizes",
    "preprocess_options",
)
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


# ---- A preset's shape ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """The shape of a decoder: GPT's (feed-forward 4 x ``d_model``), or Llama's with its key/value heads, MLP width
    and head tying (``contract/presets.py``'s fields of those names; 0 = n_head, 4 x d_model)."""

    n_layer: int
    d_model: int
    n_head: int
    architecture: str = "gpt"
    n_kv_head: int = 0
    ffn_width: int = 0
    tie_embeddings: bool = True

    def parameters(self, vocab_size: int, sequence_length: int) -> int:
        """Closed-form parameter count (``contract/presets.py``'s ``parameter_count``).

        E.g. gpt3-125m: 12 x (12·768² + 13·768) + (50,257 + 2,048)·768 + 2·768 = 125.2 M.
        """
        return training_module("presets").parameter_count(self, vocab_size=vocab_size, sequence_length=sequence_length)


@functools.cache
def model_presets() -> dict[str, ModelShape]:
    """Preset name -> shape, from ``training/contract/presets.json``: every row, which the estimate models."""
    rows = training_module("presets").load_presets()
    fields = [f.name for f in dataclasses.fields(ModelShape)]
    return {name: ModelShape(**{f: getattr(row, f) for f in fields}) for name, row in rows.items()}


def trained_presets() -> dict[str, ModelShape]:
    """The presets train.py trains, which the Plan accepts: the gpt rows (a llama row's decoder is built by
    ``gpt/architectures.py`` and modelled by the estimate, but the training job does not run it yet)."""
    return {name: shape for name, shape in model_presets().items() if shape.architecture == "gpt"}


def shape_of(
    preset: str, n_layer: int | None = None, d_model: int | None = None, n_head: int | None = None
) -> ModelShape:
    """A preset's shape with any explicit override applied (``None`` or 0 keeps the preset's value)."""
    base = model_presets()[preset]
    return dataclasses.replace(
        base, n_layer=n_layer or base.n_layer, d_model=d_model or base.d_model, n_head=n_head or base.n_head
    )


# ---- preprocess.py's options ----------------------------------------------------------------------------


@functools.cache
def preprocess_options() -> dict[str, Any]:
    """``contract/preprocess_options.py``'s table (name -> ``Option``), given the three modules it reads."""
    return training_module("preprocess_options").options(*map(training_module, ("formats", "hparams", "sizes")))


def container_arguments(mode: str, values: Mapping[str, Any]) -> list[str]:
    """A processing job's container arguments: ``mode`` and ``values`` (option name -> value), each checked as
    preprocess.py will (``contract/preprocess_options.py``'s ``container_arguments``)."""
    return training_module("preprocess_options").container_arguments(preprocess_options(), mode, values)


# ---- A configuration's recipe ----------------------------------------------------------------------------

RECIPE_HYPERPARAMETERS = ("learning_rate", "lr_reference_tokens", "warmup_steps", "decay_steps")


def recipe_for(preset: str, global_batch_tokens: int, train_tokens: int, hyperparameters: Mapping[str, Any] = {}):
    """The ``contract/recipe.py`` ``Recipe`` train.py will use for this configuration and the execution's
    ``hyperparameters`` (train.py's defaults for the rest), for the Plan step's summary and the estimate's table:
    e.g. gpt3-1.3b at 1,048,576 tokens a step -> 2.0e-4."""
    hparams = training_module("hparams")
    given = hparams.check_hyperparameters({k: v for k, v in hyperparameters.items() if k in RECIPE_HYPERPARAMETERS})
    values = {name: given.get(name, hparams.BY_NAME[name].default) for name in RECIPE_HYPERPARAMETERS}
    return training_module("recipe").run_recipe(
        training_module("presets").load_presets()[preset],
        global_batch_tokens=global_batch_tokens,
        max_steps=training_module("batch").optimizer_steps(train_tokens, global_batch_tokens),  # as the request
        **values,
    )


def recipe_summary(recipe) -> dict[str, Any]:
    """A JSON-ready recipe (the Plan step's ``summary.recipe``)."""
    return {
        "peak_lr": recipe.peak_lr,
        "warmup_steps": recipe.warmup_steps,
        "decay_steps": recipe.decay_steps,
        "departures": list(recipe.departures),
    }
