import keras
import numpy as np
import pytest
import tensorflow as tf

from gpt.layers import CausalSelfAttention, DecoderBlock, LayerNorm, gelu


def test_block_is_pre_norm_with_two_residuals():
    block = DecoderBlock(d_model=32, n_head=4, n_layer=2)
    x = tf.random.stateless_normal([2, 6, 32], seed=[1, 2])
    out = block(x).numpy()
    h = x + block.attn(block.ln_1(x))  # first residual around normalised attention
    expected = h + block.fc_proj(tf.nn.gelu(block.fc(block.ln_2(h)), approximate=True))  # second, around the MLP
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-5, atol=1e-5)


def test_attention_is_causal_and_first_position_attends_only_to_itself():
    attention = CausalSelfAttention(d_model=16, n_head=2)
    x = tf.random.stateless_normal([1, 5, 16], seed=[3, 4])
    out = attention(x).numpy()
    # Position 0 sees itself only: its output equals the output for a one-token sequence.
    np.testing.assert_allclose(out[:, :1], attention(x[:, :1]).numpy(), rtol=1e-5, atol=1e-6)
    x_changed = tf.concat([x[:, :3], x[:, 3:] + 1.0], axis=1)
    np.testing.assert_array_equal(out[:, :3], attention(x_changed).numpy()[:, :3])


def test_residual_projections_start_smaller_in_deeper_models():
    shallow, deep = DecoderBlock(64, 2, n_layer=1), DecoderBlock(64, 2, n_layer=16)
    shallow.build((1, 4, 64))
    deep.build((1, 4, 64))
    assert np.std(deep.fc_proj.kernel.numpy()) < np.std(shallow.fc_proj.kernel.numpy()) / 2


def gradients(layer_or_fn, x, weights=()):
    upstream = tf.random.stateless_normal(x.shape, seed=[5, 6])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer_or_fn(x)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
    return [y, *tape.gradient(loss, [x, *weights])]


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_layer_norm_equals_keras_values_and_gradients(dtype):
    x = tf.random.stateless_normal([4, 7, 32], seed=[1, 2]) * 3 + 1
    ours, keras_norm = LayerNorm(epsilon=1e-5, dtype=dtype), keras.layers.LayerNormalization(epsilon=1e-5, dtype=dtype)
    for norm in (ours, keras_norm):
        norm.build(x.shape)
        norm.gamma.assign(tf.random.stateless_normal([32], seed=[3, 4]))
        norm.beta.assign(tf.random.stateless_normal([32], seed=[5, 6]))
    tolerance = 1e-5 if dtype == "float32" else 2e-2
    for a, b in zip(
        gradients(lambda v: ours(v, training=True), x, [ours.gamma, ours.beta]),  # the written-out gradient
        gradients(keras_norm, x, [keras_norm.gamma, keras_norm.beta]),
        strict=True,
    ):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(tf.cast(a, tf.float32), tf.cast(b, tf.float32), rtol=tolerance, atol=tolerance)
    with pytest.raises(ValueError, match="last axis"):
        LayerNorm(axis=1)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_fused_gelu_equals_keras_values_and_gradients(dtype):
    x = tf.cast(tf.random.stateless_normal([64, 16], seed=[7, 8]) * 3, dtype)
    tolerance = 1e-5 if dtype == tf.float32 else 2e-2  # float32: XLA's tanh is 4e-6 off near 0
    for a, b in zip(
        gradients(gelu, x),
        gradients(lambda v: keras.activations.gelu(tf.cast(v, tf.float32), approximate=True), x),
        strict=True,
    ):
        np.testing.assert_allclose(tf.cast(a, tf.float32), tf.cast(b, tf.float32), rtol=tolerance, atol=tolerance)


def test_training_and_inference_blocks_agree():
    """Training runs the fused GELU, inference Keras' (the export needs no XLA): the same function."""
    block = DecoderBlock(d_model=32, n_head=4)
    x = tf.random.stateless_normal([2, 6, 32], seed=[1, 2])
    np.testing.assert_allclose(block(x, training=True), block(x, training=False), rtol=1e-5, atol=1e-6)
