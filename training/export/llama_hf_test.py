"""The Llama conversion without torch: names, shapes and config fields of ``tests/hf/transformers_llama.json``
(written by transformers itself: ``tests/hf/llama_check.py --write-table``), LlamaForCausalLM's forward pass as
``modeling_llama.py`` computes it, in NumPy, on the file, the exact round trip, and what the import refuses.
``make hf-check`` holds both directions against transformers itself."""

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from gpt.llama import Llama

from export.hugging_face import SafetensorsError, write_safetensors
from export.llama_hf import CheckpointError, export_llama_hf, import_llama_hf, llama_tensors

TABLE = json.loads((Path(__file__).parents[2] / "tests" / "hf" / "transformers_llama.json").read_text())
SHAPE = TABLE["config"]  # vocab 80, 2 layers of 32, 4 heads on 2 key/value heads, MLP 48, untied


def table_model(**kwargs) -> Llama:
    """A Llama of the table's shape, its weights far from their initialisation (logits of several units)."""
    arguments = dict(n_layer=SHAPE["num_hidden_layers"], d_model=SHAPE["hidden_size"], d_ff=SHAPE["intermediate_size"])
    arguments.update(n_head=SHAPE["num_attention_heads"], n_kv_head=SHAPE["num_key_value_heads"])
    model = Llama(SHAPE["vocab_size"], 16, **{**arguments, "tie_embeddings": False, **kwargs})
    rng = np.random.default_rng(5)
    model.set_weights([w + rng.normal(0, 0.3, w.shape).astype(w.dtype) for w in model.get_weights()])
    return model


def test_names_shapes_and_config_are_transformers_llamas(tmp_path):
    folder = export_llama_hf(table_model(), tmp_path / "hf", bos_token_id=0, eos_token_id=1)
    shapes = {name: list(t.shape) for name, t in llama_tensors(table_model()).items()}
    assert shapes == TABLE["state_dict"]
    tied = {name: list(t.shape) for name, t in llama_tensors(table_model(tie_embeddings=True)).items()}
    assert tied == {name: s for name, s in TABLE["state_dict"].items() if name not in TABLE["tied"]}
    config = json.loads((folder / "config.json").read_text())
    aliases = {"model_type", "torch_dtype", "architectures", "rope_theta", "rope_scaling"}  # read by LlamaConfig
    assert set(config) - aliases <= set(TABLE["config_fields"]), set(config) - aliases - set(TABLE["config_fields"])
    assert {name: config[name] for name in SHAPE} == SHAPE


def llama_logits(t: dict[str, np.ndarray], ids: np.ndarray, config: dict) -> np.ndarray:
    """LlamaForCausalLM's forward pass (transformers' modeling_llama.py) in float64: Linear is x @ weightᵀ, q k v
    viewed as [heads, head_dim], rotate_half RoPE with inv_freq = theta^(-2i/e), repeat_kv, SiLU-gated MLP."""
    heads, kv, d = config["num_attention_heads"], config["num_key_value_heads"], config["hidden_size"]
    e, length = d // heads, ids.shape[1]

    def norm(x, name):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + config["rms_norm_eps"]) * t[name]

    def view(x, n):
        return x.reshape(*x.shape[:2], n, e).transpose(0, 2, 1, 3)

    angles = np.arange(length)[:, None] * (1.0 / config["rope_theta"] ** (np.arange(0, e, 2) / e))[None]
    cos, sin = np.cos(np.concatenate([angles, angles], -1)), np.sin(np.concatenate([angles, angles], -1))

    def rope(x):
        return x * cos + np.concatenate([-x[..., e // 2 :], x[..., : e // 2]], -1) * sin

    x = t["model.embed_tokens.weight"][ids]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = norm(x, p + "input_layernorm.weight")
        q = rope(view(h @ t[p + "self_attn.q_proj.weight"].T, heads))
        k = rope(view(h @ t[p + "self_attn.k_proj.weight"].T, kv)).repeat(heads // kv, axis=1)
        v = view(h @ t[p + "self_attn.v_proj.weight"].T, kv).repeat(heads // kv, axis=1)
        scores = np.where(np.tril(np.ones([length, length], bool)), q @ k.transpose(0, 1, 3, 2) / np.sqrt(e), -np.inf)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        out = ((probs / probs.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        x = x + out @ t[p + "self_attn.o_proj.weight"].T
        h = norm(x, p + "post_attention_layernorm.weight")
        gate, up = h @ t[p + "mlp.gate_proj.weight"].T, h @ t[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ t[p + "mlp.down_proj.weight"].T
    return norm(x, "model.norm.weight") @ t.get("lm_head.weight", t["model.embed_tokens.weight"]).T


@pytest.mark.parametrize("tie", [False, True])
def test_llamas_forward_pass_on_the_file_gives_the_models_logits(tmp_path, tie):
    """Catches what shapes cannot: a transposed square tensor (q_proj, o_proj), the q | k | v or gate | up order."""
    model = table_model(tie_embeddings=tie)
    config = json.loads((export_llama_hf(model, tmp_path / "hf") / "config.json").read_text())
    tensors = {name: np.asarray(t, np.float64) for name, t in llama_tensors(model).items()}
    ids = np.random.default_rng(0).integers(0, SHAPE["vocab_size"], [2, 16])
    ours = model(tf.constant(ids, tf.int32)).numpy()
    assert np.abs(ours).max() > 3
    np.testing.assert_allclose(ours, llama_logits(tensors, ids, config), atol=1e-4, rtol=0)


@pytest.mark.parametrize("tie", [False, True])
def test_a_round_trip_is_exact(tmp_path, tie):
    model = table_model(tie_embeddings=tie)
    first = export_llama_hf(model, tmp_path / "first", 0, 1)
    again = import_llama_hf(first)
    ids = tf.constant(np.random.default_rng(1).integers(0, SHAPE["vocab_size"], [2, 16]), tf.int32)
    np.testing.assert_array_equal(again(ids).numpy(), model(ids).numpy())
    second = export_llama_hf(again, tmp_path / "second", 0, 1)
    for name in ("config.json", "model.safetensors"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_bfloat16_and_sharded_checkpoints_are_read(tmp_path):
    """Published checkpoints are bf16 and, above a few GB, shards named by model.safetensors.index.json."""
    model = table_model()
    folder = export_llama_hf(model, tmp_path / "hf")
    tensors = llama_tensors(model)
    bf16 = {name: (np.asarray(t, "<f4").view("<u4") >> 16).astype("<u2") for name, t in tensors.items()}
    names = list(bf16)
    (folder / "model.safetensors").unlink()
    index = {}
    for part, chunk in enumerate((names[: len(names) // 2], names[len(names) // 2 :])):
        write_bf16(folder / f"model-{part}.safetensors", {n: bf16[n] for n in chunk})
        index.update(dict.fromkeys(chunk, f"model-{part}.safetensors"))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))
    imported = llama_tensors(import_llama_hf(folder))
    for name, t in tensors.items():  # bf16 keeps float32's top 16 bits: the same value truncated
        np.testing.assert_array_equal(imported[name], (bf16[name].astype("<u4") << 16).view("<f4"))
        np.testing.assert_allclose(imported[name], t, rtol=2**-7)


def write_bf16(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header, offset = {}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(t.tobytes() for t in tensors.values()))


def edit_config(folder: Path, **fields) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **fields}))


def test_what_the_import_refuses_in_one_line(tmp_path):
    def exported(name: str) -> Path:
        return export_llama_hf(table_model(), tmp_path / name)

    cases = []
    folder = exported("pickle")
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")  # a pickle is never opened
    cases.append((folder, SafetensorsError, "model.safetensors: not a regular file"))
    folder = exported("link")
    (folder / "model.safetensors").rename(tmp_path / "elsewhere.safetensors")
    os.symlink(tmp_path / "elsewhere.safetensors", folder / "model.safetensors")
    cases.append((folder, SafetensorsError, "links are not followed"))
    folder = exported("shape")
    edit_config(folder, intermediate_size=64)
    cases.append(
        (folder, CheckpointError, r"tensor model.layers.0.mlp.gate_proj.weight: the config describes \[64, 32\]")
    )
    folder = exported("extra")
    write_safetensors(folder / "model.safetensors", {**llama_tensors(table_model()), "x.bias": np.zeros(2)}, {})
    cases.append((folder, CheckpointError, "tensors this model does not have: x.bias"))
    folder = exported("rope")
    edit_config(folder, rope_scaling={"rope_type": "yarn", "factor": 4.0})
    cases.append((folder, CheckpointError, "expected rope_type one of default, llama3"))
    folder = exported("bias")
    edit_config(folder, attention_bias=True)
    cases.append((folder, CheckpointError, "attention_bias True is not False"))
    folder = exported("offsets")
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[8:] = data[8:].replace(b'"data_offsets":[0,', b'"data_offsets":[9,', 1)
    (folder / "model.safetensors").write_bytes(bytes(data))
    cases.append((folder, SafetensorsError, "a byte range of its size within the file"))
    folder = exported("shard")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "../../etc/x.safetensors"}}))
    cases.append((folder, CheckpointError, "weight_map must name .safetensors files in the folder"))
    for folder, error, message in cases:
        with pytest.raises(error, match=message) as raised:
            import_llama_hf(folder)
        assert "\n" not in str(raised.value), folder.name
