"""Model presets, read from the training package's own table (``training/gpt/presets.json``).

infra/ reads that JSON file instead of importing the training code, so synthesis never imports
TensorFlow and the table exists once.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

PRESETS_FILE = Path(__file__).resolve().parent.parent / "training" / "gpt" / "presets.json"


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """The shape of a GPT decoder; the feed-forward width is 4 x ``d_model``."""

    n_layer: int
    d_model: int
    n_head: int

    def parameters(self, vocab_size: int, sequence_length: int) -> int:
        """Closed-form parameter count with a tied output projection.

        Per block: attention 4·d² + 4·d, feed-forward 8·d² + 5·d, two layer norms 4·d = 12·d² + 13·d.
        Embeddings: (vocab + context)·d; final layer norm 2·d.
        E.g. gpt3-125m: 12 x (12·768² + 13·768) + (50,257 + 2,048)·768 + 2·768 = 125.2 M.
        """
        d = self.d_model
        return self.n_layer * (12 * d * d + 13 * d) + (vocab_size + sequence_length) * d + 2 * d


@functools.cache
def model_presets() -> dict[str, ModelShape]:
    """Preset name -> shape, from ``training/gpt/presets.json``."""
    table = json.loads(PRESETS_FILE.read_text())
    return {
        name: ModelShape(row["n_layer"], row["d_model"], row["n_head"])
        for name, row in table.items()
        if not name.startswith("_")
    }


def shape_of(
    preset: str, n_layer: int | None = None, d_model: int | None = None, n_head: int | None = None
) -> ModelShape:
    """A preset's shape with any explicit override applied (``None`` or 0 keeps the preset's value)."""
    base = model_presets()[preset]
    return ModelShape(n_layer=n_layer or base.n_layer, d_model=d_model or base.d_model, n_head=n_head or base.n_head)
