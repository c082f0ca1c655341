"""Model presets, from the training package's own table and code (``training/contract/presets.py``).

infra loads that standard-library module by path (``infra/training_code.py``) instead of importing the
training package, so synthesis never imports TensorFlow, and the table, its recipe and the per-block
parameter formula exist once.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import re
from typing import Any

from infra.training_code import training_module


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """The shape of a GPT decoder; the feed-forward width is 4 x ``d_model``."""

    n_layer: int
    d_model: int
    n_head: int

    def parameters(self, vocab_size: int, sequence_length: int) -> int:
        """Closed-form parameter count with a tied output projection (``contract/presets.py``'s ``parameter_count``).

        E.g. gpt3-125m: 12 x (12·768² + 13·768) + (50,257 + 2,048)·768 + 2·768 = 125.2 M.
        """
        return training_module("presets").parameter_count(self, vocab_size=vocab_size, sequence_length=sequence_length)


def block_parameters(d_model: int) -> int:
    """One decoder block: 12d² + 13d (``contract/presets.py``'s formula)."""
    return training_module("presets").block_parameters(d_model)


def preset_rows() -> dict[str, Any]:
    """Preset name -> the training package's ``Preset`` (shape and recipe)."""
    return training_module("presets").load_presets()


@functools.cache
def model_presets() -> dict[str, ModelShape]:
    """Preset name -> shape, from ``training/contract/presets.json``."""
    return {name: ModelShape(row.n_layer, row.d_model, row.n_head) for name, row in preset_rows().items()}


def shape_of(
    preset: str, n_layer: int | None = None, d_model: int | None = None, n_head: int | None = None
) -> ModelShape:
    """A preset's shape with any explicit override applied (``None`` or 0 keeps the preset's value)."""
    base = model_presets()[preset]
    return ModelShape(n_layer=n_layer or base.n_layer, d_model=d_model or base.d_model, n_head=n_head or base.n_head)


# GPT-2's sizes (Radford et al. 2019, Table 2, as released: 124 M, 355 M, 774 M, 1.5 B parameters), to point a
# GPT-2 name at the preset of about its size.
GPT2_PARAMETERS = {"gpt2": 124e6, "gpt2-small": 124e6, "gpt2-medium": 355e6, "gpt2-large": 774e6, "gpt2-xl": 1.5e9}


def suggest_preset(name: str) -> str | None:
    """The preset a mistyped or foreign name most likely means: by size first, then by spelling.

    ``gpt2-small`` -> ``gpt3-125m`` (124 M parameters, not the 17 M ``small``), ``llama-7b`` -> ``gpt3-6.7b``,
    ``gpt3-125M`` -> ``gpt3-125m``, ``tiyn`` -> ``tiny``.
    """
    key = name.strip().lower()
    if key in model_presets():
        return key
    size = GPT2_PARAMETERS.get(key)
    if size is None and (match := re.search(r"(\d+(?:\.\d+)?)\s*([mb])\b", key)):
        size = float(match.group(1)) * (1e6 if match.group(2) == "m" else 1e9)
    if size:
        counts = {n: s.parameters(50_257, 2048) for n, s in model_presets().items()}
        return min(counts, key=lambda n: abs(math.log(counts[n] / size)))
    close = difflib.get_close_matches(key, list(model_presets()), n=1)
    return close[0] if close else None
