"""Model shapes and their training recipe from ``presets.json``, and the closed-form parameter count.

The GPT-3 paper (Brown et al. 2020, Table 2.1) names its models by parameter count; this module
computes the exact count of our architecture for a shape so tests can compare it with the paper's
rounded figure and with a built model. It is the one home of the per-block formula.

Standard library only: infra loads this file (``infra/training_code.py``) for the estimate and the
workflow's Plan step, which run where TensorFlow is not installed.

Example:
    >>> preset = get_preset("gpt3-125m")
    >>> preset.n_layer, preset.d_model
    (12, 768)
    >>> round(parameter_count(preset, vocab_size=50257, sequence_length=2048) / 1e6)
    125
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

PRESETS_FILE = Path(__file__).with_name("presets.json")


@dataclasses.dataclass(frozen=True)
class Preset:
    """One row of presets.json: a transformer shape and its recipe. The feed-forward width is 4 x d_model.

    The recipe (GPT-3 rows: Table 2.1 and appendix B): ``peak_lr`` at a global batch of ``batch_tokens``,
    linear warm-up over ``warmup_tokens``, cosine decay to 10% over ``decay_tokens``.
    """

    name: str
    n_layer: int
    d_model: int
    n_head: int
    paper_params: int | None = None
    peak_lr: float = 6.0e-4
    batch_tokens: int = 524_288
    warmup_tokens: int = 375_000_000
    decay_tokens: int = 260_000_000_000

    @property
    def d_ff(self) -> int:
        return 4 * self.d_model

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


def load_presets(path: str | Path = PRESETS_FILE) -> dict[str, Preset]:
    """Every preset of the table, by name (keys starting with "_" are comments)."""
    table = json.loads(Path(path).read_text())
    presets = {}
    for name, row in table.items():
        if name.startswith("_"):
            continue
        presets[name] = Preset(
            name,
            row["n_layer"],
            row["d_model"],
            row["n_head"],
            row.get("paper_params"),
            row["peak_lr"],
            row["batch_tokens"],
            row["warmup_tokens"],
            row["decay_tokens"],
        )
        if row["d_model"] % row["n_head"]:
            raise ValueError(f"preset {name}: d_model {row['d_model']} is not divisible by n_head {row['n_head']}")
    return presets


def get_preset(name: str) -> Preset:
    """The named preset; a ValueError lists the known names otherwise."""
    presets = load_presets()
    if name not in presets:
        raise ValueError(f"unknown model_preset {name!r}; known: {', '.join(presets)}")
    return presets[name]


def get_shape(name: str, n_layer: int = 0, d_model: int = 0, n_head: int = 0) -> Preset:
    """The named preset with any shape override applied (0 keeps the preset's value); the recipe stays."""
    preset = get_preset(name)
    shape = dataclasses.replace(
        preset, n_layer=n_layer or preset.n_layer, d_model=d_model or preset.d_model, n_head=n_head or preset.n_head
    )
    if shape.d_model % shape.n_head:
        raise ValueError(f"n_head {shape.n_head} does not divide d_model {shape.d_model}")
    return shape


def block_parameters(d_model: int) -> int:
    """Parameters of one decoder block of width d.

    attention  qkv d x 3d + 3d, output d x d + d      = 4d^2 + 4d
    MLP        d x 4d + 4d, 4d x d + d                = 8d^2 + 5d
    two layer norms (gain and bias)                   = 4d
    total                                             = 12d^2 + 13d
    e.g. d = 768: 12 x 589,824 + 9,984 = 7,087,872
    """
    return 12 * d_model * d_model + 13 * d_model


def parameter_count(preset: Preset, *, vocab_size: int, sequence_length: int) -> int:
    """Closed-form parameter count: embeddings + blocks + final norm; the output projection is tied.

    gpt3-125m, V = 50,257, T = 2,048:
    token embedding 50,257 x 768 = 38.6 M, positions 2,048 x 768 = 1.6 M,
    12 blocks x 7.09 M = 85.1 M, final norm 1,536: 125.2 M in all.
    """
    d = preset.d_model
    embeddings = vocab_size * d + sequence_length * d
    return embeddings + preset.n_layer * block_parameters(d) + 2 * d


def flops_per_token(preset: Preset, *, n_params: int, sequence_length: int) -> int:
    """Training FLOPs per token: 6N for the weights (forward 2N, backward 4N) plus attention scores.

    Attention adds 2 matmuls (QK^T and AV) of T x d per token and layer, forward and backward:
    6 x 2 x n_layer x T x d = 12 x L x T x d (PaLM paper, appendix B).
    """
    return 6 * n_params + 12 * preset.n_layer * sequence_length * preset.d_model
