import numpy as np
import tensorflow as tf

from gpt.layers import CausalSelfAttention, DecoderBlock


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
