import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf
from contract.presets import get_shape, load_presets, parameter_count

from gpt.architectures import build_model
from gpt.llama import Llama
from gpt.llama_layers import inverse_frequencies, rotate
from gpt.model import GPT, padded_vocab

VOCAB, LENGTH = 97, 16
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}


def tiny(**kwargs) -> Llama:
    return Llama.from_preset("llama-tiny", vocab_size=VOCAB, sequence_length=LENGTH, seed=3, **kwargs)


def random_ids(batch=2, length=LENGTH, seed=0) -> tf.Tensor:
    return tf.constant(np.random.default_rng(seed).integers(0, VOCAB, [batch, length]), tf.int32)


def far_from_initial(model, seed=5, scale=0.3):
    rng = np.random.default_rng(seed)
    model.set_weights([w + rng.normal(0, scale, w.shape).astype(w.dtype) for w in model.get_weights()])
    return model


@pytest.mark.parametrize("t", [0, 5, LENGTH - 1])
def test_changing_token_t_changes_no_output_before_t(t):
    model = far_from_initial(tiny())
    ids = random_ids()
    changed = tf.tensor_scatter_nd_update(ids, [[0, t], [1, t]], (ids[:, t] + 1) % VOCAB)
    before, after = model(ids).numpy(), model(changed).numpy()
    np.testing.assert_array_equal(before[:, :t], after[:, :t])  # the past does not see the future, bit for bit
    assert np.abs(before[:, t:] - after[:, t:]).max() > 1e-4


def test_grouped_query_attention_equals_multi_head_with_each_kv_head_repeated():
    """4 query heads on 2 key/value heads = 4 heads whose k and v weights are kv head j // 2's: query head j reads
    kv head j // 2 (transformers' repeat_kv), not j % 2."""
    gqa = far_from_initial(tiny())
    mha = Llama(VOCAB, LENGTH, 2, 64, 4, n_kv_head=4, d_ff=176, tie_embeddings=False, seed=3)
    e, h, g = 16, 4, 2
    for ours, theirs in zip(gqa.blocks, mha.blocks, strict=True):
        kernel = ours.attn.qkv.kernel.numpy()
        q, k, v = kernel[:, : h * e], kernel[:, h * e : (h + g) * e], kernel[:, (h + g) * e :]
        repeat = [j // (h // g) for j in range(h)]
        k4, v4 = (np.concatenate([w[:, j * e : (j + 1) * e] for j in repeat], 1) for w in (k, v))
        theirs.attn.qkv.kernel.assign(np.concatenate([q, k4, v4], 1))
        for name in ("ln_1", "ln_2"):
            getattr(theirs, name).gamma.assign(getattr(ours, name).gamma)
        for name in ("gate_up", "down"):
            getattr(theirs, name).kernel.assign(getattr(ours, name).kernel)
        theirs.attn.proj.kernel.assign(ours.attn.proj.kernel)
    mha.token_embedding.embeddings.assign(gqa.token_embedding.embeddings)
    mha.lm_head.embeddings.assign(gqa.lm_head.embeddings)
    mha.ln_f.gamma.assign(gqa.ln_f.gamma)
    ids = random_ids()
    np.testing.assert_allclose(gqa(ids).numpy(), mha(ids).numpy(), atol=2e-5, rtol=0)
    assert gqa.blocks[0].attn.qkv.kernel.shape[1] == (h + 2 * g) * e  # the K/V projections are g heads wide


def complex_rotation(x: np.ndarray, position: int, inverse: np.ndarray) -> np.ndarray:
    """RoPE as a rotation of complex numbers (RoFormer, eq. 34), in transformers' half layout: dimension i and
    i + e/2 are the real and imaginary parts of z_i, multiplied by exp(i · position · ω_i)."""
    half = x.shape[-1] // 2
    z = (x[..., :half] + 1j * x[..., half:]) * np.exp(1j * position * inverse.astype(np.float64))
    return np.concatenate([z.real, z.imag], -1)


@pytest.mark.parametrize("scaling", [None, {**LLAMA3, "original_max_position_embeddings": 64}])
def test_rope_is_a_rotation_by_position_and_scores_depend_on_the_offset_only(scaling):
    e = 16
    inverse = inverse_frequencies(e, 10_000.0, scaling)
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=[1, 1, 1, e]), rng.normal(size=[1, 1, 1, e])

    def at(x, p):
        return rotate(tf.constant(x, tf.float64), tf.constant([p]), tf.constant(inverse, tf.float64)).numpy()

    for p in (0, 3, 40):
        np.testing.assert_allclose(at(q, p), complex_rotation(q, p, inverse), atol=1e-12)
    score = {(m, n): float(np.sum(at(q, m) * at(k, n))) for m in range(0, 60, 7) for n in range(0, 60, 5)}
    for (m, n), s in score.items():  # <R_m q, R_n k> = <q, R_{n-m} k>
        assert s == pytest.approx(float(np.sum(q * at(k, n - m))), abs=1e-9), (m, n)
    assert len({round(s, 6) for s in score.values()}) > 20  # and it does depend on the offset


def test_the_attentions_scores_of_one_token_repeated_depend_on_the_offset_only():
    """The same input at every position: the score of query m and key n (q and k as the layer makes them) is a
    function of m - n alone, and not a constant."""
    attention = far_from_initial(tiny()).blocks[0].attn
    x = tf.tile(tf.constant(np.random.default_rng(2).normal(size=[1, 1, 64]), tf.float32), [1, LENGTH, 1])
    q, k, _ = attention.heads(x)
    scores = tf.matmul(q, tf.repeat(k, 2, axis=1), transpose_b=True).numpy()[0]  # [heads, T, T]
    for offset in range(-LENGTH + 1, LENGTH):
        diagonal = np.diagonal(scores, offset, axis1=1, axis2=2)
        np.testing.assert_allclose(diagonal, diagonal[:, :1].repeat(diagonal.shape[1], 1), atol=1e-4)
    assert np.ptp(scores[:, 0, :], axis=-1).min() > 1e-2  # each head's scores vary with the offset


def test_llama3_scaling_divides_long_wavelengths_keeps_short_ones_and_smooths_between():
    e, context = 64, 64
    plain = inverse_frequencies(e, 500_000.0)
    scaled = inverse_frequencies(e, 500_000.0, {**LLAMA3, "original_max_position_embeddings": context})
    wavelength = 2 * np.pi / plain
    short, long = wavelength < context / 4, wavelength > context / 1
    assert short.any() and long.any() and (~short & ~long).any()  # all three bands at this shape
    np.testing.assert_array_equal(scaled[short], plain[short])
    np.testing.assert_allclose(scaled[long], plain[long] / 8, rtol=1e-6)
    between = ~short & ~long
    assert np.all((scaled[between] < plain[between]) & (scaled[between] > plain[between] / 8))
    with pytest.raises(ValueError, match="rope_type 'yarn' is not supported"):
        inverse_frequencies(e, 1e4, {"rope_type": "yarn", "factor": 4.0})


def test_tied_and_untied_heads_and_the_closed_form_count():
    untied, tied = tiny(), tiny(tie_embeddings=True)
    assert sum("embeddings" in v.path for v in untied.trainable_variables) == 2  # tokens and lm_head
    assert sum("embeddings" in v.path for v in tied.trainable_variables) == 1
    assert not any("bias" in v.path or "beta" in v.path for v in untied.trainable_variables)  # no biases
    shape = get_shape("llama-tiny")
    for model, tie in ((untied, False), (tied, True)):
        expected = parameter_count(
            dataclasses.replace(shape, tie_embeddings=tie), vocab_size=padded_vocab(VOCAB), sequence_length=LENGTH
        )
        assert model.count_params() == expected


def loss_and_grads(model, ids):
    with tf.GradientTape() as tape:
        loss = model.loss_sum(ids[:, :-1], ids[:, 1:], training=True)
    return loss, tape.gradient(loss, model.trainable_variables)


@pytest.mark.parametrize("recompute", ["full", "attention", "mlp"])
def test_recompute_gives_the_same_gradients_with_dropout(recompute):
    plain, recomputed = tiny(dropout=0.2), tiny(dropout=0.2, recompute=recompute)
    recomputed.set_weights(plain.get_weights())
    ids = random_ids(length=LENGTH + 1)
    loss_a, grads_a = loss_and_grads(plain, ids)
    loss_b, grads_b = loss_and_grads(recomputed, ids)
    assert float(loss_a) == pytest.approx(float(loss_b), rel=1e-6)
    for a, b in zip(grads_a, grads_b, strict=True):
        # tf.convert_to_tensor: the untied token embedding's gradients are IndexedSlices
        np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b), rtol=1e-4, atol=1e-6)


def test_mixed_precision_computes_in_bfloat16_and_returns_float32_logits():
    model = tiny(dtype="mixed_bfloat16")
    assert model.blocks[0].gate_up.compute_dtype == "bfloat16" and model.blocks[0].ln_1.gamma.dtype == "float32"
    assert model(random_ids()).dtype == tf.float32


def test_the_presets_architecture_chooses_the_decoder_and_an_unknown_one_fails_in_one_line(tmp_path):
    assert type(build_model(get_shape("llama-tiny"), vocab_size=VOCAB, sequence_length=LENGTH)) is Llama
    assert type(build_model(get_shape("tiny"), vocab_size=VOCAB, sequence_length=LENGTH)) is GPT
    with pytest.raises(ValueError, match=r"^architecture 'mamba' is not valid; expected one of gpt, llama$"):
        build_model(dataclasses.replace(get_shape("tiny"), architecture="mamba"), vocab_size=8, sequence_length=4)
    table = tmp_path / "presets.json"
    row = {"architecture": "mamba", "n_layer": 1, "d_model": 8, "n_head": 2, "peak_lr": 1e-3}
    table.write_text(json.dumps({"x": {**row, "batch_tokens": 1, "warmup_tokens": 1, "decay_tokens": 1}}))
    with pytest.raises(ValueError, match=r"^preset x: architecture 'mamba' is not one of gpt, llama$"):
        load_presets(table)


def test_every_llama_preset_builds_its_published_shape_in_closed_form():
    llama = {name: p for name, p in load_presets().items() if p.architecture == "llama" and p.published_params}
    assert set(llama) == {
        "smollm2-135m",
        "smollm2-360m",
        "smollm2-1.7b",
        "tinyllama-1.1b",
        "llama3.2-1b",
        "llama3.2-3b",
    }
    for name, preset in llama.items():
        count = parameter_count(preset, vocab_size=preset.published_vocab, sequence_length=2048)
        assert count == pytest.approx(preset.published_params, rel=0.01), f"{name}: {count:,}"
