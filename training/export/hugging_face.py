"""A Hugging Face GPT-2 checkpoint of the model, beside the SavedModel: what transformers, lm-evaluation-harness,
vLLM and PEFT load with no code of ours (``AutoModelForCausalLM`` / ``AutoTokenizer.from_pretrained(folder)``).

    <export_dir>/hf/
        config.json              GPT2Config: the shape, tanh GELU ("gelu_new"), epsilon 1e-5, tied head, float32
        model.safetensors        the weights under GPT-2's parameter names, float32 whatever the training precision
        tokenizer.json           the tokenizer the model was trained with (the ``tokenizers`` format)
        tokenizer_config.json    its class and special tokens (<|endoftext|> is bos, eos and unk, as GPT-2's)

The model is GPT-2's architecture: Keras Dense kernels are [in, out] as GPT-2's Conv1D weights are, and the
fused qkv columns are q | k | v, each by head, as GPT-2's ``c_attn``; so every tensor is saved as it is. The
head is the token embedding (``tie_word_embeddings``): there is no ``lm_head.weight``, as in GPT-2's own files.

``model.safetensors`` is written here with NumPy and the standard library (the job container has no
``safetensors``): an 8-byte little-endian header length, a JSON header (each tensor's dtype, shape and byte
range, then ``__metadata__``), padded with spaces to 8 bytes, and the tensors' little-endian bytes in order.
Checked against transformers' own GPT2LMHeadModel by ``make hf-check`` (``tests/hf/check.py``).
"""

from __future__ import annotations

import json
import math
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np

HF_DIR = "hf"
END_OF_TEXT = "<|endoftext|>"  # token_shards.END_OF_TEXT: the tokenizer's one special token
# GPT2Config's fields (transformers' models/gpt2/configuration_gpt2.py) that this architecture fixes.
FIXED_CONFIG = {
    "architectures": ["GPT2LMHeadModel"],
    "model_type": "gpt2",
    "activation_function": "gelu_new",  # GELU's tanh approximation (gpt/layers.py)
    "layer_norm_epsilon": 1e-5,
    "initializer_range": 0.02,
    "scale_attn_weights": True,  # scores / sqrt(head_dim)
    "scale_attn_by_inverse_layer_idx": False,
    "reorder_and_upcast_attn": False,
    "tie_word_embeddings": True,
    "use_cache": True,
    "torch_dtype": "float32",
}


def gpt2_tensors(model) -> dict[str, Any]:
    """The model's variables under GPT-2's parameter names: GPT2LMHeadModel's state dict less the tied
    ``lm_head.weight``. The token embedding's vocab_size rows, without the padding (``gpt.model.padded_vocab``)."""
    named = {"transformer.wte.weight": model.token_embedding.embeddings[: model.vocab_size]}
    named["transformer.wpe.weight"] = model.position_embedding.embeddings
    for i, block in enumerate(model.blocks):
        layers = {
            "ln_1": block.ln_1,
            "attn.c_attn": block.attn.qkv,
            "attn.c_proj": block.attn.proj,
            "ln_2": block.ln_2,
            "mlp.c_fc": block.fc,
            "mlp.c_proj": block.fc_proj,
        }
        for name, layer in layers.items():
            named.update(_weight_and_bias(f"transformer.h.{i}.{name}", layer))
    named.update(_weight_and_bias("transformer.ln_f", model.ln_f))
    return named


def _weight_and_bias(prefix: str, layer) -> dict[str, Any]:
    """A Dense's kernel and bias, or a LayerNorm's gamma and beta, as ``<prefix>.weight`` and ``<prefix>.bias``."""
    weight, bias = (layer.kernel, layer.bias) if hasattr(layer, "kernel") else (layer.gamma, layer.beta)
    return {f"{prefix}.weight": weight, f"{prefix}.bias": bias}


def gpt2_config(model, dropout: float, end_of_text_id: int) -> dict[str, Any]:
    """config.json as GPT2Config reads it. ``dropout`` is the training run's (the exported copy has none)."""
    return {
        **FIXED_CONFIG,
        "vocab_size": model.vocab_size,
        "n_positions": model.sequence_length,
        "n_embd": model.d_model,
        "n_layer": model.n_layer,
        "n_head": model.n_head,
        "n_inner": 4 * model.d_model,
        "resid_pdrop": dropout,
        "embd_pdrop": dropout,
        "attn_pdrop": dropout,
        "bos_token_id": end_of_text_id,
        "eos_token_id": end_of_text_id,
    }


def tokenizer_config(sequence_length: int) -> dict[str, Any]:
    """tokenizer_config.json: tokenizer.json as it is (``PreTrainedTokenizerFast``), GPT-2's special tokens."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": END_OF_TEXT,
        "eos_token": END_OF_TEXT,
        "unk_token": END_OF_TEXT,
        "model_max_length": sequence_length,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
    }


def write_safetensors(path: Path, tensors: dict[str, Any], metadata: dict[str, str]) -> None:
    """``tensors`` (arrays or variables) in the safetensors format, float32, in the given order. Each is read
    (from whichever device holds it) and cast when it is written: one tensor at a time in host memory."""
    header: dict[str, Any] = {}
    offset = 0
    for name, tensor in tensors.items():
        shape = [int(n) for n in tensor.shape]
        size = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    header["__metadata__"] = metadata
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the tensors start 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded)
        for tensor in tensors.values():
            np.ascontiguousarray(tensor, dtype="<f4").tofile(f)


def end_of_text_id(tokenizer_path: Path) -> int:
    """The id of <|endoftext|> among tokenizer.json's added tokens."""
    added = json.loads(Path(tokenizer_path).read_text(encoding="utf-8")).get("added_tokens", [])
    ids = [token["id"] for token in added if token["content"] == END_OF_TEXT]
    if not ids:
        raise ValueError(f"{tokenizer_path} has no {END_OF_TEXT} token")
    return ids[0]


def export_hf(model, folder: str | Path, tokenizer_path: str | Path, dropout: float = 0.0) -> Path:
    """Writes the checkpoint into ``folder`` (created) and returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    eot = end_of_text_id(tokenizer_path)
    config = gpt2_config(model, dropout, eot)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(folder / "model.safetensors", gpt2_tensors(model), {"format": "pt"})
    shutil.copyfile(tokenizer_path, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(model.sequence_length), indent=2) + "\n")
    return folder
