"""The learning-rate recipe train.py will use for a training configuration, and how it departs from the preset's.

train.py computes it with ``training/contract/recipe.py`` from its hyperparameters; this computes the same from
the configuration and the execution's ``hyperparameters`` (train.py's defaults for the rest), for the Plan
step's summary and the estimate's table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.presets import preset_rows
from infra.training_code import training_module

RECIPE_HYPERPARAMETERS = ("learning_rate", "lr_reference_tokens", "warmup_steps", "decay_steps")


def recipe_for(preset: str, global_batch_tokens: int, train_tokens: int, hyperparameters: Mapping[str, Any] = {}):
    """``contract/recipe.py``'s ``Recipe`` for this run: e.g. gpt3-1.3b at 1,048,576 tokens a step -> 2.0e-4."""
    hparams = training_module("hparams")
    given = hparams.check_hyperparameters({k: v for k, v in hyperparameters.items() if k in RECIPE_HYPERPARAMETERS})
    values = {name: given.get(name, hparams.BY_NAME[name].default) for name in RECIPE_HYPERPARAMETERS}
    return training_module("recipe").run_recipe(
        preset_rows()[preset],
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
