import json
import platform
import sys
import tarfile

import numpy as np
import tensorflow as tf
from gpt.generate import generate
from gpt.model import GPT

from export.saved_model import export, float32_copy


def test_saved_model_serves_generation_and_logits(tmp_path):
    model = GPT.from_preset("tiny", vocab_size=64, sequence_length=8, seed=2, dtype="mixed_bfloat16", dropout=0.1)
    tokenizer = tmp_path / "src-tokenizer.json"
    tokenizer.write_text('{"model": {}}')
    fp32 = float32_copy(model)
    assert fp32.blocks[0].fc.compute_dtype == "float32" and fp32.dropout == 0.0
    serving = export(fp32, tmp_path / "model", tokenizer)
    path = serving.path

    assert path == tmp_path / "model" / "1" and (path / "saved_model.pb").is_file()
    assert (tmp_path / "model" / "tokenizer.json").read_text() == '{"model": {}}'
    assert json.loads((tmp_path / "model" / "model_config.json").read_text())["vocab_size"] == 64

    loaded = tf.saved_model.load(str(path))
    assert set(loaded.signatures) == {"serving_default", "logits"}
    serve = loaded.signatures["serving_default"]
    assert set(serve.structured_input_signature[1]) == {"prompt_ids", "max_new_tokens", "temperature", "top_k", "seed"}
    prompt = tf.constant([[1, 2, 3]], tf.int32)

    def served(n, temperature=0.0, top_k=0, seed=0):
        args = {"max_new_tokens": tf.constant(n), "temperature": tf.constant(temperature)}
        return serve(prompt_ids=prompt, top_k=tf.constant(top_k), seed=tf.constant(seed), **args)["token_ids"].numpy()

    # 3 + 5 tokens fit the 8-token context (the cached loop); 3 + 9 do not (the sliding window).
    for n in (5, 9):
        expected = generate(fp32, prompt, tf.constant(n), tf.constant(0.0), tf.constant(0), use_cache=False)
        np.testing.assert_array_equal(served(n), expected.numpy())
    np.testing.assert_array_equal(served(5, 1.0, 3, seed=7), served(5, 1.0, 3, seed=7))
    # The traced function keeps its positional (prompt, n, temperature, seed) call; top_k defaults to 0.
    np.testing.assert_array_equal(serving.generate(prompt, 5, 0.0, 0)["token_ids"].numpy(), served(5))

    logits = loaded.signatures["logits"](token_ids=prompt)["logits"]
    np.testing.assert_allclose(logits.numpy(), fp32(prompt).numpy(), rtol=1e-5, atol=1e-5)
    # The float32 copy is the mixed-precision model's weights, computed in float32: close, not equal.
    np.testing.assert_allclose(logits.numpy(), model(prompt).numpy(), atol=0.05)


def test_model_archive_has_the_layout_the_serving_container_expects(tmp_path):
    """SageMaker tars the export folder as model.tar.gz; the TF Serving container unpacks it in /opt/ml/model,
    serves every <name>/<number>/saved_model.pb it finds and runs code/inference.py with code/lib on the path."""
    model = GPT.from_preset("tiny", vocab_size=64, sequence_length=8)
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")
    export(model, tmp_path / "model", tokenizer)
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:  # as SageMaker does: the folder's contents at the root
        for path in sorted((tmp_path / "model").rglob("*")):
            tar.add(path, arcname=path.relative_to(tmp_path / "model").as_posix(), recursive=False)
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        requirements = tar.extractfile("code/requirements.txt").read().decode()
        hooks = tar.extractfile("code/inference.py").read().decode()
    assert {"1/saved_model.pb", "1/variables/variables.index", "tokenizer.json", "model_config.json"} <= names
    assert {"code/inference.py", "code/requirements.txt"} <= names
    assert [n for n in names if n.endswith("saved_model.pb")] == ["1/saved_model.pb"]  # one model, version 1
    assert "def input_handler(data, context)" in hooks and "def output_handler(response, context)" in hooks
    assert any(line.startswith("tokenizers==") for line in requirements.splitlines())
    if sys.platform == "linux" and platform.machine() == "x86_64":
        assert "code/lib/tokenizers/__init__.py" in names


def test_saved_model_needs_no_xla(tmp_path):
    """TF Serving runs no XLA-compiled function: on a GPU it fails with 'Could not find compiler for platform
    CUDA' (tensorflow/serving#2214), on a CPU it needs the experimental --xla_cpu_compilation_enabled flag,
    which the SageMaker container does not pass. The training step's fused kernels must stay out of the export."""
    from tensorflow.core.protobuf import saved_model_pb2

    model = GPT.from_preset("tiny", vocab_size=64, sequence_length=8)
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")
    serving = export(model, tmp_path / "model", tokenizer)
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((serving.path / "saved_model.pb").read_bytes())
    graph = saved.meta_graphs[0].graph_def
    compiled = [f.signature.name for f in graph.library.function if f.attr["_XlaMustCompile"].b]
    assert graph.library.function and compiled == []
