"""The Llama decoder to and from a Hugging Face ``LlamaForCausalLM`` checkpoint (config.json and safetensors).

    <folder>/
        config.json                         LlamaConfig: the shape, SiLU, no biases, rope_theta and rope_scaling
        model.safetensors                   the weights under LlamaForCausalLM's names, float32
        (or model.safetensors.index.json and the shards it names, as transformers writes large checkpoints)

Tensors are transformers' ``nn.Linear`` weights, [out, in]: a Keras kernel transposed. Our fused projections are
split: qkv into q_proj, k_proj, v_proj (columns q | k | v, each by head, transformers' own order, so no permutation
of RoPE's dimensions); fc into gate_proj | up_proj. A tied head writes no ``lm_head.weight``.

Import is data only: config.json's fields each checked, the safetensors headers checked (``hugging_face.
safetensors_header``) and every name and shape compared with the model the config describes before anything
is allocated or read; no pickle (``pytorch_model.bin``) is ever opened. ``tests/hf/llama_check.py`` holds both
directions against transformers itself (``make hf-check``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from contract.hparams import BY_NAME, shown
from gpt.llama import Llama
from gpt.llama_layers import ROPE_TYPES

from export.hugging_face import read_tensor, safetensors_header, write_safetensors

MAX_CONFIG_BYTES = 1 << 20
INDEX = "model.safetensors.index.json"
# config.json's fields and train.py's hyperparameter whose range bounds each.
SHAPE_FIELDS = {
    "vocab_size": "vocab_size",
    "hidden_size": "d_model",
    "intermediate_size": "d_model",
    "num_hidden_layers": "n_layer",
    "num_attention_heads": "n_head",
    "num_key_value_heads": "n_head",
    "max_position_embeddings": "sequence_length",
}


class CheckpointError(ValueError):
    """A Hugging Face folder that does not describe a Llama this checkout builds; the message says why."""


def llama_tensors(model: Llama) -> dict[str, Any]:
    """The model's weights under LlamaForCausalLM's state-dict names, [out, in], the vocabulary's rows only."""
    e = model.d_model // model.n_head
    h, g, f, v = model.n_head * e, model.n_kv_head * e, model.d_ff, model.vocab_size  # q's and k's widths
    named = {"model.embed_tokens.weight": np.asarray(model.token_embedding.embeddings)[:v]}
    for i, block in enumerate(model.blocks):
        qkv, gate_up = np.asarray(block.attn.qkv.kernel), np.asarray(block.gate_up.kernel)
        layer = f"model.layers.{i}."
        named[layer + "input_layernorm.weight"] = np.asarray(block.ln_1.gamma)
        named[layer + "self_attn.q_proj.weight"] = qkv[:, :h].T
        named[layer + "self_attn.k_proj.weight"] = qkv[:, h : h + g].T
        named[layer + "self_attn.v_proj.weight"] = qkv[:, h + g :].T
        named[layer + "self_attn.o_proj.weight"] = np.asarray(block.attn.proj.kernel).T
        named[layer + "post_attention_layernorm.weight"] = np.asarray(block.ln_2.gamma)
        named[layer + "mlp.gate_proj.weight"] = gate_up[:, :f].T
        named[layer + "mlp.up_proj.weight"] = gate_up[:, f:].T
        named[layer + "mlp.down_proj.weight"] = np.asarray(block.down.kernel).T
    named["model.norm.weight"] = np.asarray(model.ln_f.gamma)
    if not model.tie_embeddings:
        named["lm_head.weight"] = np.asarray(model.lm_head.embeddings)[:v]
    return named


def llama_config(model: Llama, bos_token_id: int | None = None, eos_token_id: int | None = None) -> dict[str, Any]:
    """config.json as LlamaConfig reads it: rope_theta and rope_scaling as the published checkpoints write them
    (transformers 5 reads them into its rope_parameters)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": model.vocab_size,
        "hidden_size": model.d_model,
        "intermediate_size": model.d_ff,
        "num_hidden_layers": model.n_layer,
        "num_attention_heads": model.n_head,
        "num_key_value_heads": model.n_kv_head,
        "head_dim": model.d_model // model.n_head,
        "hidden_act": "silu",
        "max_position_embeddings": model.sequence_length,
        "rms_norm_eps": model.norm_epsilon,
        "rope_theta": model.rope_theta,
        "rope_scaling": model.rope_scaling,
        "tie_word_embeddings": model.tie_embeddings,
        "attention_bias": False,
        "mlp_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "pretraining_tp": 1,
        "use_cache": True,
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
        "torch_dtype": "float32",
    }


def export_llama_hf(
    model: Llama, folder: str | Path, bos_token_id: int | None = None, eos_token_id: int | None = None
) -> Path:
    """Writes config.json and model.safetensors (float32) into ``folder`` (created) and returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = llama_config(model, bos_token_id, eos_token_id)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(folder / "model.safetensors", llama_tensors(model), {"format": "pt"})
    return folder


def model_arguments(config: dict[str, Any]) -> dict[str, Any]:
    """Llama's arguments from a config.json object, each field checked; CheckpointError names the first wrong one."""
    if config.get("model_type") != "llama":
        raise CheckpointError(f"config.json: model_type {shown(config.get('model_type'))} is not 'llama'")
    sizes = {}
    for field, bound in SHAPE_FIELDS.items():
        value = config.get(field, config.get("num_attention_heads") if field == "num_key_value_heads" else None)
        high = BY_NAME[bound].kind.high
        if type(value) is not int or not 1 <= value <= high:
            raise CheckpointError(
                f"config.json: {field} {shown(value)} is not valid; expected an integer from 1 to {high:,}"
            )
        sizes[field] = value
    d, heads, kv = sizes["hidden_size"], sizes["num_attention_heads"], sizes["num_key_value_heads"]
    if d % heads or heads % kv or config.get("head_dim", d // heads) != d // heads:
        raise CheckpointError(
            f"config.json: {heads} heads of {shown(config.get('head_dim'))} on {d} with {kv} key/value heads: "
            "this model needs heads dividing hidden_size, head_dim = hidden_size / heads and kv heads dividing heads"
        )
    fixed = {"hidden_act": "silu", "attention_bias": False, "mlp_bias": False}
    for field, expected in fixed.items():
        if config.get(field, expected) != expected:
            raise CheckpointError(
                f"config.json: {field} {shown(config.get(field))} is not {expected!r}, which this model has"
            )
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}  # transformers 5's, or 4's and the Hub's
    theta = rope.get("rope_theta", config.get("rope_theta", 10_000.0)) if isinstance(rope, dict) else None
    kind = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else None
    if kind not in ROPE_TYPES or isinstance(theta, bool) or not isinstance(theta, int | float) or not theta > 1:
        raise CheckpointError(
            f"config.json: rope {shown(rope)} (theta {shown(theta)}): expected rope_type one of "
            f"{', '.join(ROPE_TYPES)} and a base above 1"
        )
    scaling = None
    if kind == "llama3":
        keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
        values = [rope.get(k) for k in keys]
        if (
            not all(isinstance(x, int | float) and not isinstance(x, bool) and x > 0 for x in values)
            or values[1] >= values[2]
        ):
            raise CheckpointError(
                f"config.json: llama3 rope scaling {shown(rope)} needs positive {', '.join(keys)}, low below high"
            )
        scaling = {"rope_type": "llama3", **dict(zip(keys, values, strict=True))}
    epsilon, tie = config.get("rms_norm_eps", 1e-6), config.get("tie_word_embeddings", False)
    if (
        isinstance(epsilon, bool)
        or not isinstance(epsilon, int | float)
        or not 0 < epsilon < 1
        or not isinstance(tie, bool)
    ):
        raise CheckpointError(
            f"config.json: rms_norm_eps {shown(epsilon)} or tie_word_embeddings {shown(tie)} is not valid"
        )
    return {
        "vocab_size": sizes["vocab_size"],
        "sequence_length": sizes["max_position_embeddings"],
        "n_layer": sizes["num_hidden_layers"],
        "d_model": d,
        "n_head": heads,
        "n_kv_head": kv,
        "d_ff": sizes["intermediate_size"],
        "rope_theta": float(theta),
        "rope_scaling": scaling,
        "tie_embeddings": tie,
        "norm_epsilon": float(epsilon),
    }


def expected_shapes(arguments: dict[str, Any]) -> dict[str, list[int]]:
    """Every tensor name of the checkpoint of these arguments and its shape (``llama_tensors``')."""
    d, f, v, e = (
        arguments["d_model"],
        arguments["d_ff"],
        arguments["vocab_size"],
        arguments["d_model"] // arguments["n_head"],
    )
    shapes = {"model.embed_tokens.weight": [v, d]}
    for i in range(arguments["n_layer"]):
        layer = f"model.layers.{i}."
        shapes[layer + "input_layernorm.weight"] = [d]
        shapes[layer + "self_attn.q_proj.weight"] = [arguments["n_head"] * e, d]
        shapes[layer + "self_attn.k_proj.weight"] = [arguments["n_kv_head"] * e, d]
        shapes[layer + "self_attn.v_proj.weight"] = [arguments["n_kv_head"] * e, d]
        shapes[layer + "self_attn.o_proj.weight"] = [d, arguments["n_head"] * e]
        shapes[layer + "post_attention_layernorm.weight"] = [d]
        shapes[layer + "mlp.gate_proj.weight"] = [f, d]
        shapes[layer + "mlp.up_proj.weight"] = [f, d]
        shapes[layer + "mlp.down_proj.weight"] = [d, f]
    shapes["model.norm.weight"] = [d]
    if not arguments["tie_embeddings"]:
        shapes["lm_head.weight"] = [v, d]
    return shapes


def _json(path: Path) -> Any:
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
        raise CheckpointError(f"{path.name}: missing, a link, or over {MAX_CONFIG_BYTES:,} bytes")
    try:
        return json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        raise CheckpointError(f"{path.name}: not JSON") from None


def _shards(folder: Path) -> list[Path]:
    """model.safetensors, or the shards model.safetensors.index.json names (plain file names in the folder)."""
    if not (folder / INDEX).exists():
        return [folder / "model.safetensors"]
    index = _json(folder / INDEX)
    names = set((index.get("weight_map") or {}).values()) if isinstance(index, dict) else set()
    bad = [n for n in names if not isinstance(n, str) or Path(n).name != n or not n.endswith(".safetensors")]
    if not names or bad:
        raise CheckpointError(f"{INDEX}: its weight_map must name .safetensors files in the folder ({shown(bad[:3])})")
    return [folder / name for name in sorted(names)]


def import_llama_hf(folder: str | Path, dtype: str = "float32", **kwargs) -> Llama:
    """Our Llama with the checkpoint's weights (``kwargs``: dropout, recompute, seed); CheckpointError (or a
    ``SafetensorsError``) before anything is built when the folder does not describe this model exactly.

    Usage::

        model = import_llama_hf("checkpoints/SmolLM2-135M")  # its config.json and model.safetensors
    """
    folder = Path(folder)
    arguments = model_arguments(_json(folder / "config.json"))
    expected, found = expected_shapes(arguments), {}
    for shard in _shards(folder):
        header, _, start = safetensors_header(shard)
        found.update({name: (shard, entry, start) for name, entry in header.items()})
    if arguments["tie_embeddings"] and "lm_head.weight" in found:  # some tied checkpoints also save the tied copy
        expected["lm_head.weight"] = expected["model.embed_tokens.weight"]
    for name, shape in expected.items():
        if name not in found or found[name][1]["shape"] != shape:
            has = found[name][1]["shape"] if name in found else "nothing"
            raise CheckpointError(f"tensor {name}: the config describes {shape}, the checkpoint has {has}")
    extra = sorted(set(found) - set(expected))
    if extra:
        raise CheckpointError(f"tensors this model does not have: {', '.join(extra[:5])}")
    tensors = {name: read_tensor(*found[name]) for name in expected}
    tied_copy = tensors.pop("lm_head.weight") if arguments["tie_embeddings"] and "lm_head.weight" in tensors else None
    if tied_copy is not None and not np.array_equal(tied_copy, tensors["model.embed_tokens.weight"]):
        raise CheckpointError("tie_word_embeddings is true but lm_head.weight differs from model.embed_tokens.weight")
    model = Llama(**arguments, dtype=dtype, **kwargs)
    _assign(model, tensors)
    return model


def _assign(model: Llama, tensors: dict[str, np.ndarray]) -> None:
    """The checkpoint's tensors into the model's variables (transposed, fused); the padding rows zero."""
    v = model.vocab_size

    def rows(variable, weight):
        padded = np.zeros(variable.shape, np.float32)
        padded[:v] = weight
        variable.assign(padded)

    rows(model.token_embedding.embeddings, tensors["model.embed_tokens.weight"])
    if model.lm_head is not None:
        rows(model.lm_head.embeddings, tensors["lm_head.weight"])
    for i, block in enumerate(model.blocks):
        t = {name.split(".", 3)[3]: value for name, value in tensors.items() if name.startswith(f"model.layers.{i}.")}
        block.ln_1.gamma.assign(t["input_layernorm.weight"])
        block.attn.qkv.kernel.assign(np.concatenate([t[f"self_attn.{p}_proj.weight"].T for p in "qkv"], 1))
        block.attn.proj.kernel.assign(t["self_attn.o_proj.weight"].T)
        block.ln_2.gamma.assign(t["post_attention_layernorm.weight"])
        block.gate_up.kernel.assign(np.concatenate([t["mlp.gate_proj.weight"].T, t["mlp.up_proj.weight"].T], 1))
        block.down.kernel.assign(t["mlp.down_proj.weight"].T)
    model.ln_f.gamma.assign(tensors["model.norm.weight"])
