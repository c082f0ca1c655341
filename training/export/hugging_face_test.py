"""The Hugging Face export against transformers' GPT-2, without torch: the names, shapes and config fields of
``tests/hf/transformers_gpt2.json`` (written by transformers itself: ``tests/hf/check.py --write-table``), the
safetensors layout, and GPT-2's forward pass as ``modeling_gpt2.py`` computes it, in NumPy, on the file.
``make hf-check`` loads the export with transformers itself."""

import itertools
import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from gpt.model import GPT
from gpt.pipeline.model import PipelinedGPT, stage_of

from export.hugging_face import END_OF_TEXT, export_hf, gpt2_tensors
from export.saved_model import float32_copy

TABLE = json.loads((Path(__file__).parents[2] / "tests" / "hf" / "transformers_gpt2.json").read_text())
SHAPE = TABLE["config"]  # vocab 80, 16 positions, 2 layers of 32, 2 heads
EOT = 3


def table_model(**kwargs) -> GPT:
    """A GPT of the table's shape, its weights drawn far from their initialisation (logits of several units)."""
    model = GPT(SHAPE["vocab_size"], SHAPE["n_positions"], SHAPE["n_layer"], SHAPE["n_embd"], SHAPE["n_head"], **kwargs)
    rng = np.random.default_rng(5)
    model.set_weights([w + rng.normal(0, 0.3, w.shape).astype(w.dtype) for w in model.get_weights()])
    return model


def tokenizer_file(folder: Path) -> Path:
    path = folder / "src-tokenizer.json"
    path.write_text(json.dumps({"added_tokens": [{"id": EOT, "content": END_OF_TEXT, "special": True}]}))
    return path


def read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """The format as specified (huggingface/safetensors README): u64 LE header size, JSON header, contiguous bytes."""
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    assert (8 + size) % 8 == 0 and data[8 : 8 + size].rstrip(b" ").endswith(b"}")
    metadata = header.pop("__metadata__")
    spans = sorted(tuple(entry["data_offsets"]) for entry in header.values())
    assert spans[0][0] == 0 and spans[-1][1] == len(data) - 8 - size  # the whole buffer, no gap, no overlap
    assert all(end == next_begin for (_, end), (next_begin, _) in itertools.pairwise(spans))
    buffer = data[8 + size :]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        assert entry["dtype"] == "F32"
        tensors[name] = np.frombuffer(buffer[begin:end], "<f4").reshape(entry["shape"])
    return tensors, metadata


def gpt2_logits(t: dict[str, np.ndarray], ids: np.ndarray, config: dict) -> np.ndarray:
    """GPT2LMHeadModel's forward pass (transformers' modeling_gpt2.py) in float64: Conv1D is x @ weight + bias,
    c_attn's output splits into q, k, v, each viewed as [n_head, head_dim]; tanh GELU; the head is wteᵀ."""

    def layer_norm(x, name):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + config["layer_norm_epsilon"]) * t[f"{name}.weight"] + t[f"{name}.bias"]

    def conv1d(x, name):
        return x @ t[f"{name}.weight"] + t[f"{name}.bias"]

    def heads(x):
        return x.reshape(*x.shape[:2], config["n_head"], -1).transpose(0, 2, 1, 3)

    length = ids.shape[1]
    x = t["transformer.wte.weight"][ids] + t["transformer.wpe.weight"][:length]
    for i in range(config["n_layer"]):
        h = f"transformer.h.{i}."
        q, k, v = map(heads, np.split(conv1d(layer_norm(x, h + "ln_1"), h + "attn.c_attn"), 3, axis=-1))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
        scores = np.where(np.tril(np.ones([length, length], bool)), scores, -np.inf)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        out = (probs / probs.sum(-1, keepdims=True)) @ v
        x = x + conv1d(out.transpose(0, 2, 1, 3).reshape(x.shape), h + "attn.c_proj")
        hidden = conv1d(layer_norm(x, h + "ln_2"), h + "mlp.c_fc")
        hidden = 0.5 * hidden * (1 + np.tanh(math.sqrt(2 / math.pi) * (hidden + 0.044715 * hidden**3)))  # gelu_new
        x = x + conv1d(hidden, h + "mlp.c_proj")
    return layer_norm(x, "transformer.ln_f") @ t["transformer.wte.weight"].T


def test_names_shapes_and_config_are_transformers_gpt2s(tmp_path):
    folder = export_hf(table_model(), tmp_path / "hf", tokenizer_file(tmp_path), dropout=0.1)
    tensors, metadata = read_safetensors(folder / "model.safetensors")
    expected = {name: shape for name, shape in TABLE["state_dict"].items() if name not in TABLE["tied"]}
    assert {name: list(array.shape) for name, array in tensors.items()} == expected
    assert metadata == {"format": "pt"}  # transformers refuses a file whose format is not pt/tf/flax/mlx

    config = json.loads((folder / "config.json").read_text())
    aliases = {"model_type", "torch_dtype"}  # a class attribute, and the name older transformers read dtype by
    assert set(config) - aliases <= set(TABLE["config_fields"]), set(config) - aliases - set(TABLE["config_fields"])
    assert {name: config[name] for name in SHAPE} == SHAPE
    assert config["activation_function"] == TABLE["config_defaults"]["activation_function"] == "gelu_new"
    assert config["n_inner"] == 4 * SHAPE["n_embd"] and config["tie_word_embeddings"] is True
    assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"]
    assert (config["layer_norm_epsilon"], config["torch_dtype"], config["resid_pdrop"]) == (1e-5, "float32", 0.1)
    assert (config["bos_token_id"], config["eos_token_id"]) == (EOT, EOT)

    tokenizer = json.loads((folder / "tokenizer_config.json").read_text())
    assert {tokenizer[k] for k in ("bos_token", "eos_token", "unk_token")} == {END_OF_TEXT}
    assert tokenizer["model_max_length"] == SHAPE["n_positions"]
    assert (folder / "tokenizer.json").read_bytes() == tokenizer_file(tmp_path).read_bytes()


def test_gpt2s_forward_pass_on_the_file_gives_the_models_logits(tmp_path):
    """Catches what shapes cannot: a transposed square tensor (the attention's output projection), q/k/v order."""
    model = table_model()
    folder = export_hf(model, tmp_path / "hf", tokenizer_file(tmp_path))
    tensors, _ = read_safetensors(folder / "model.safetensors")
    ids = np.random.default_rng(0).integers(0, SHAPE["vocab_size"], [2, SHAPE["n_positions"]])
    theirs = gpt2_logits(
        {k: v.astype(np.float64) for k, v in tensors.items()}, ids, {**SHAPE, "layer_norm_epsilon": 1e-5}
    )
    ours = model(tf.constant(ids, tf.int32)).numpy()
    assert np.abs(ours).max() > 3  # logits of several units: a wrong layout shows
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=0)


def test_a_bf16_pipelined_model_exports_the_same_float32_file(tmp_path, two_logical_cpus):
    """Its stages' weights gathered from their devices, in float32, byte for byte the single-device model's file."""
    devices = ["/CPU:0", "/CPU:1"]
    pipelined = PipelinedGPT(80, 16, 2, 32, 2, dtype="mixed_bfloat16", devices=devices)
    single = table_model()
    pipelined.set_weights(single.get_weights())
    with tf.device("/CPU:0"):  # parallelism.Pipelined.export_device
        copy = float32_copy(pipelined)
    assert {v.dtype for v in pipelined.weights} == {"float32"} and pipelined.compute_dtype == "bfloat16"
    assert {stage_of(v, devices) for v in gpt2_tensors(pipelined).values()} == {0, 1}  # gathered from both
    tokenizer = tokenizer_file(tmp_path)
    expected = (export_hf(single, tmp_path / "single", tokenizer) / "model.safetensors").read_bytes()
    for name, model in (("copy", copy), ("pipelined", pipelined)):  # as the job exports it, and the model itself
        folder = export_hf(model, tmp_path / name, tokenizer)
        assert (folder / "model.safetensors").read_bytes() == expected, name
        assert json.loads((folder / "config.json").read_text())["torch_dtype"] == "float32"


def test_a_tokenizer_without_end_of_text_is_refused(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"added_tokens": [{"id": 0, "content": "<pad>"}]}))
    with pytest.raises(ValueError, match=r"has no <\|endoftext\|> token"):
        export_hf(table_model(), tmp_path / "hf", path)
