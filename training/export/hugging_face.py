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

import itertools
import json
import math
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
from contract.hparams import shown

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


MAX_HEADER_BYTES = 100 * 2**20  # the safetensors reference implementation refuses a larger header
READ_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}  # BF16: the upper half of a float32


class SafetensorsError(ValueError):
    """A safetensors file that is not one: the message says what is wrong, in one line."""


def safetensors_header(path: Path) -> tuple[dict[str, dict], dict, int]:
    """(each tensor's dtype, shape and byte range; ``__metadata__``; where the tensors' bytes start), every field
    checked against the format (huggingface/safetensors README) and the file's size before anything is read of
    them: a link, a header over MAX_HEADER_BYTES, a dtype other than READ_DTYPES', a range outside the file, of
    the wrong size or overlapping another are refused."""
    path = Path(path)
    if path.is_symlink() or not path.is_file():
        raise SafetensorsError(f"{path.name}: not a regular file (links are not followed)")
    size = path.stat().st_size
    with open(path, "rb") as f:
        prefix = f.read(8)
        length = struct.unpack("<Q", prefix)[0] if len(prefix) == 8 else -1
        if not 0 < length <= min(MAX_HEADER_BYTES, size - 8):
            raise SafetensorsError(f"{path.name}: header length {length} does not fit the file ({size:,} bytes)")
        try:
            header = json.loads(f.read(length))
        except (ValueError, RecursionError):
            raise SafetensorsError(f"{path.name}: the header is not JSON") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path.name}: the header is not a JSON object")
    metadata = header.pop("__metadata__", {})
    available, spans = size - 8 - length, []
    for name, entry in header.items():
        dtype, shape, span = (
            entry.get(k) if isinstance(entry, dict) else None for k in ("dtype", "shape", "data_offsets")
        )
        valid = (
            dtype in READ_DTYPES
            and isinstance(shape, list)
            and all(type(n) is int and n >= 0 for n in shape)
            and isinstance(span, list)
            and len(span) == 2
            and all(type(n) is int for n in span)
            and 0 <= span[0] <= span[1] <= available
            and span[1] - span[0] == math.prod(shape) * np.dtype(READ_DTYPES.get(dtype, "u1")).itemsize
        )
        if not valid:
            raise SafetensorsError(
                f"{path.name}: tensor {shown(name)}: {shown(entry)} is not a dtype of "
                f"{', '.join(READ_DTYPES)}, a shape and a byte range of its size within the file"
            )
        spans.append((span[0], span[1], name))
    for (_, end, name), (begin, _, after) in itertools.pairwise(sorted(spans)):
        if begin < end:
            raise SafetensorsError(f"{path.name}: tensors {shown(name)} and {shown(after)} overlap")
    return header, metadata, 8 + length


def read_tensor(path: Path, entry: dict, start: int) -> np.ndarray:
    """One tensor of a checked header (``safetensors_header``), as float32."""
    begin, end = entry["data_offsets"]
    with open(path, "rb") as f:
        f.seek(start + begin)
        data = np.frombuffer(f.read(end - begin), READ_DTYPES[entry["dtype"]])
    if entry["dtype"] == "BF16":
        data = (data.astype("<u4") << 16).view("<f4")
    return data.astype(np.float32).reshape(entry["shape"])


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
