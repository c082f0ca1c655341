import json

import numpy as np
import tensorflow as tf
from export import export, float32_copy
from gpt.generate import generate
from gpt.model import GPT


def test_saved_model_serves_generation_and_logits(tmp_path):
    model = GPT.from_preset("tiny", vocab_size=64, sequence_length=8, seed=2, dtype="mixed_bfloat16", dropout=0.1)
    tokenizer = tmp_path / "src-tokenizer.json"
    tokenizer.write_text('{"model": {}}')
    fp32 = float32_copy(model)
    assert fp32.blocks[0].fc.compute_dtype == "float32" and fp32.dropout == 0.0
    path = export(fp32, tmp_path / "model", tokenizer).path

    assert path == tmp_path / "model" / "1" and (path / "saved_model.pb").is_file()
    assert (tmp_path / "model" / "tokenizer.json").read_text() == '{"model": {}}'
    assert json.loads((tmp_path / "model" / "model_config.json").read_text())["vocab_size"] == 64

    loaded = tf.saved_model.load(str(path))
    assert set(loaded.signatures) == {"serving_default", "logits"}
    serve = loaded.signatures["serving_default"]
    prompt = tf.constant([[1, 2, 3]], tf.int32)
    out = serve(prompt_ids=prompt, max_new_tokens=tf.constant(6), temperature=tf.constant(0.0), seed=tf.constant(0))
    expected = generate(fp32, prompt, tf.constant(6), tf.constant(0.0), tf.constant(0))
    np.testing.assert_array_equal(out["token_ids"].numpy(), expected.numpy())

    logits = loaded.signatures["logits"](token_ids=prompt)["logits"]
    np.testing.assert_allclose(logits.numpy(), fp32(prompt).numpy(), rtol=1e-5, atol=1e-5)
    # The float32 copy is the mixed-precision model's weights, computed in float32: close, not equal.
    np.testing.assert_allclose(logits.numpy(), model(prompt).numpy(), atol=0.05)
