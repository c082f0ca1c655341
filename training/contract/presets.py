"""Model shapes and their training recipe from ``presets.json``, and the closed-form parameter count.

The GPT-3 paper (Brown et al. 2020, Table 2.1) names its models by parameter count; this module
computes the exact count of our architecture for a shape so tests can compare it with the paper's
rounded figure and with a built model. It is the one home of the per-block formulas (GPT's and Llama's).

A row's ``architecture`` (``ARCHITECTURES``) chooses the decoder: ``gpt`` (GPT-2/GPT-3: LayerNorm, learned
positions, GELU MLP 4 x d wide, biases, tied head) or ``llama`` (RMSNorm, rotary positions, SwiGLU MLP of
``d_ff``, grouped-query attention with ``n_kv_head`` key/value heads, no biases, tied or untied head).

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
ARCHITECTURES = ("gpt", "llama")  # gpt/architectures.py builds each
LLAMA_FIELDS = ("n_kv_head", "ffn_width", "rope_theta", "rope_scaling", "tie_embeddings", "norm_epsilon")


@dataclasses.dataclass(frozen=True)
class Preset:
    """One row of presets.json: a transformer shape and its recipe.

    The recipe (GPT-3 rows: Table 2.1 and appendix B): ``peak_lr`` at a global batch of ``batch_tokens``,
    linear warm-up over ``warmup_tokens``, cosine decay to 10% over ``decay_tokens``. The Llama fields
    (``LLAMA_FIELDS``) are the checkpoint's config.json values; a gpt row keeps their defaults.
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
    architecture: str = "gpt"
    n_kv_head: int = 0  # key/value heads (grouped-query attention); 0 = n_head
    ffn_width: int = 0  # the MLP's hidden width; 0 = 4 x d_model
    rope_theta: float = 10_000.0  # rotary base
    rope_scaling: dict | None = None  # config.json's rope_scaling: {"rope_type": "llama3", "factor": ...} or None
    tie_embeddings: bool = True  # the output projection is the token embedding
    norm_epsilon: float = 1e-5
    published_params: int | None = None  # the model card's parameter count (rounded) at published_vocab
    published_vocab: int | None = None

    @property
    def d_ff(self) -> int:
        return self.ffn_width or 4 * self.d_model

    @property
    def kv_heads(self) -> int:
        return self.n_kv_head or self.n_head

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
        architecture = row.get("architecture", "gpt")
        if architecture not in ARCHITECTURES:
            raise ValueError(f"preset {name}: architecture {architecture!r} is not one of {', '.join(ARCHITECTURES)}")
        llama = {field: row[field] for field in LLAMA_FIELDS if field in row}
        if llama and architecture != "llama":
            raise ValueError(f"preset {name}: {', '.join(llama)} belong to architecture llama, not {architecture}")
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
            architecture,
            published_params=row.get("published_params"),
            published_vocab=row.get("published_vocab"),
            **llama,
        )
        check_heads(presets[name], f"preset {name}: ")
    return presets


def check_heads(shape: Preset, where: str = "") -> None:
    """ValueError unless the heads divide the width and the key/value heads divide the heads."""
    if shape.d_model % shape.n_head:
        raise ValueError(f"{where}n_head {shape.n_head} does not divide d_model {shape.d_model}")
    if shape.n_head % shape.kv_heads:
        raise ValueError(f"{where}n_kv_head {shape.kv_heads} does not divide n_head {shape.n_head}")


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
    check_heads(shape)
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


def sublayer_weights(shape: Preset) -> tuple[int, int]:
    """The matmul weights of one block's attention sublayer and MLP (2 FLOPs a weight a token forward); ``shape``:
    a Preset, or any object with its fields (infra's ModelShape).

    gpt    attention qkv d x 3d, output d x d = 4d^2;  MLP d x 4d, 4d x d = 8d^2
    llama  h heads and g key/value heads of width e = d / h, MLP width f:
           attention q d x h·e, k and v d x g·e each, output h·e x d = 2d·h·e + 2d·g·e (grouped-query attention's
           K and V are g/h of MHA's);  MLP gate and up d x f each, down f x d = 3d·f (SwiGLU's three matrices)
    e.g. Llama 3.2 1B (d 2,048, h 32, g 8, f 8,192): 8.39 M + 2.10 M = 10.49 M and 50.33 M
    """
    d = shape.d_model
    if shape.architecture != "llama":
        return 4 * d * d, 8 * d * d
    e, kv, f = d // shape.n_head, shape.n_kv_head or shape.n_head, shape.ffn_width or 4 * d
    return 2 * d * shape.n_head * e + 2 * d * kv * e, 3 * d * f


def shape_block_parameters(shape: Preset) -> int:
    """Parameters of one block of ``shape``'s architecture: GPT's ``block_parameters``, or a Llama block's
    ``sublayer_weights`` and two RMSNorm gains (no biases): Llama 3.2 1B, 60,821,504."""
    if shape.architecture != "llama":
        return block_parameters(shape.d_model)
    return sum(sublayer_weights(shape)) + 2 * shape.d_model


def input_parameters(shape: Preset, vocab_size: int, sequence_length: int) -> int:
    """The first stage's parameters before the blocks: token (and for gpt position) embeddings."""
    return vocab_size * shape.d_model + (sequence_length * shape.d_model if shape.architecture != "llama" else 0)


def output_parameters(shape: Preset, vocab_size: int) -> int:
    """The last stage's after the blocks: the final norm (LayerNorm 2d, RMSNorm d) and an untied head's V x d."""
    if shape.architecture != "llama":
        return 2 * shape.d_model
    return shape.d_model + (0 if shape.tie_embeddings else vocab_size * shape.d_model)


def parameter_count(preset: Preset, *, vocab_size: int, sequence_length: int) -> int:
    """Closed-form parameter count: embeddings + blocks + final norm (+ an untied output projection).

    gpt3-125m, V = 50,257, T = 2,048:
    token embedding 50,257 x 768 = 38.6 M, positions 2,048 x 768 = 1.6 M,
    12 blocks x 7.09 M = 85.1 M, final norm 1,536: 125.2 M in all.
    A llama row has no position embedding (rotary), a final RMSNorm of d gains, and V x d more when untied:
    Llama 3.2 1B, V = 128,256: 262.7 M + 16 x 60.8 M + 2,048 = 1,235,814,400.
    """
    blocks = preset.n_layer * shape_block_parameters(preset)
    return input_parameters(preset, vocab_size, sequence_length) + blocks + output_parameters(preset, vocab_size)


def flops_per_token(preset: Preset, *, n_params: int, sequence_length: int) -> int:
    """Training FLOPs per token: 6N for the weights (forward 2N, backward 4N) plus attention scores.

    Attention adds 2 matmuls (QK^T and AV) of T x d per token and layer, forward and backward:
    6 x 2 x n_layer x T x d = 12 x L x T x d (PaLM paper, appendix B). In Llama's grouped-query attention the
    scores are the query heads', h x e = d wide too (k and v repeated to them), so the term is the same.
    """
    return 6 * n_params + 12 * preset.n_layer * sequence_length * preset.d_model
