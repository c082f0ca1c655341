"""The learning-rate recipe a run trains with: its preset's (GPT-3, Table 2.1), and every way it departs.

    peak_lr     the preset's (gpt3-1.3b: 2.0e-4), or ``learning_rate``; scaled by
                global batch / ``lr_reference_tokens`` only when that is given (linear scaling rule)
    warm-up     the preset's warmup_tokens / global batch steps (375 M / 1,048,576 = 358), at most half the run's
                max_steps (a run shorter than twice its preset's warm-up would otherwise end before, or soon after,
                the learning rate peaks), or ``warmup_steps``, which must be shorter than the run
    decay       cosine to 10% at the preset's decay_tokens / global batch steps (260 B / 1,048,576 = 247,955),
                at most the run's max_steps (a shorter run decays over its own length), or ``decay_steps``

Every value that is not the preset's is listed in ``departures``, which train.py prints in its
``[config]`` line and the workflow's Plan step puts in its summary.

Standard library only: infra loads this file (``infra/training_code.py``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Protocol


class RecipeError(ValueError):
    """An explicit override the run cannot follow (a warm-up as long as the run): the message names the field."""


class RecipeSource(Protocol):
    """The recipe fields of a preset (``gpt.presets.Preset``)."""

    name: str
    peak_lr: float
    batch_tokens: int
    warmup_tokens: int
    decay_tokens: int


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A run's schedule: peak learning rate, warm-up and decay steps, and what departs from the preset."""

    peak_lr: float
    warmup_steps: int
    decay_steps: int
    departures: tuple[str, ...]

    def describe(self) -> str:
        """One line: ``none`` or the departures separated by ``; ``."""
        return "; ".join(self.departures) or "none"


def run_recipe(
    preset: RecipeSource,
    *,
    global_batch_tokens: int,
    max_steps: int,
    learning_rate: float | None = None,
    lr_reference_tokens: int = 0,
    warmup_steps: int | None = None,
    decay_steps: int | None = None,
) -> Recipe:
    """The recipe of ``preset`` at this global batch and run length, with explicit overrides applied; RecipeError
    when ``warmup_steps`` is not shorter than ``max_steps`` (the learning rate would never reach its peak)."""
    source = f"{preset.name}'s recipe"
    departures = []
    if global_batch_tokens != preset.batch_tokens:
        departures.append(f"global batch {global_batch_tokens:,} tokens ({source}: {preset.batch_tokens:,})")
    peak_lr = preset.peak_lr if learning_rate is None else learning_rate
    if lr_reference_tokens > 0:
        peak_lr = peak_lr * global_batch_tokens / lr_reference_tokens
    if not math.isclose(peak_lr, preset.peak_lr, rel_tol=1e-9):
        departures.append(f"peak learning rate {peak_lr:.3g} ({source}: {preset.peak_lr:.3g})")
    recipe_warmup = round(preset.warmup_tokens / global_batch_tokens)
    if warmup_steps is None:
        warmup_steps = min(recipe_warmup, max_steps // 2)
        if warmup_steps < recipe_warmup:
            departures.append(
                f"warm-up {warmup_steps:,} steps, half the run's {max_steps:,} ({source}: {preset.warmup_tokens:,} "
                f"tokens = {recipe_warmup:,} steps, longer than that)"
            )
    elif warmup_steps >= max_steps > 0:
        raise RecipeError(
            f"warmup_steps: {warmup_steps:,} steps is not shorter than the run's {max_steps:,}, so the learning rate "
            f"would never reach its peak ({peak_lr:.3g}); give fewer (e.g. {max_steps // 2:,}, half the run) or leave "
            f"it unset ({source}'s, at most half the run)"
        )
    elif warmup_steps != recipe_warmup:
        departures.append(
            f"warm-up {warmup_steps:,} steps ({source}: {preset.warmup_tokens:,} tokens = {recipe_warmup:,})"
        )
    recipe_decay = round(preset.decay_tokens / global_batch_tokens)
    if decay_steps is None:
        decay_steps = min(recipe_decay, max_steps)
        if decay_steps < recipe_decay:
            departures.append(
                f"decay over the run's {decay_steps:,} steps ({source}: {preset.decay_tokens:,} tokens = "
                f"{recipe_decay:,} steps)"
            )
    elif decay_steps != recipe_decay:
        departures.append(f"decay over {decay_steps:,} steps ({source}: {recipe_decay:,})")
    return Recipe(peak_lr, warmup_steps, decay_steps, tuple(departures))
