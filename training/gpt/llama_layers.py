"""The Llama block: RMSNorm, rotary positions, grouped-query attention and a SwiGLU MLP, no biases.

    x = x + Dropout(Attention(RMSNorm(x)))      q and k rotated by position (RoPE); g key/value heads for h heads
    x = x + Dropout(MLP(RMSNorm(x)))            down(silu(gate(x)) * up(x))

The formulas are transformers' ``models/llama/modeling_llama.py`` (Hugging Face's layout, so that its checkpoints
load as they are: rotate_half RoPE, q | k | v projections each by head) and ``modeling_rope_utils.py`` (the
inverse frequencies, "llama3" scaling included). Residuals, dropout and recomputation are ``layers.ResidualBlock``'s;
the attention is ``layers.causal_attention``, the same lean core as GPT's, its key/value heads repeated to the
query heads (their gradients summed back by ``tf.repeat``'s).
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf
from contract.hparams import recompute_mode

from gpt.layers import ResidualBlock, causal_attention

ROPE_TYPES = ("default", "llama3")


def inverse_frequencies(head_dim: int, theta: float, scaling: dict | None = None) -> np.ndarray:
    """RoPE's [head_dim / 2] float32 inverse frequencies theta^(-2i / head_dim), with config.json's ``rope_scaling``
    applied: None or "default" (none), or "llama3" (Llama 3.1's: wavelengths above the original context's
    / low_freq_factor divided by ``factor``, below / high_freq_factor kept, smoothed between), in float32 as
    transformers' ``_compute_llama3_parameters`` computes them."""
    inv = (1.0 / np.float32(theta) ** (np.arange(0, head_dim, 2).astype(np.float32) / np.float32(head_dim))).astype(
        np.float32
    )
    kind = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
    if kind not in ROPE_TYPES:
        raise ValueError(f"rope_scaling: rope_type {kind!r} is not supported; expected one of {', '.join(ROPE_TYPES)}")
    if kind == "default":
        return inv
    factor, low, high = (np.float32(scaling[k]) for k in ("factor", "low_freq_factor", "high_freq_factor"))
    context = np.float32(scaling["original_max_position_embeddings"])
    wavelength = np.float32(2 * math.pi) / inv
    scaled = np.where(wavelength > context / low, inv / factor, inv)
    smooth = (context / wavelength - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelength < context / high) & ~(wavelength > context / low)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def rotate(x: tf.Tensor, positions: tf.Tensor, inverse: tf.Tensor) -> tf.Tensor:
    """RoPE on [B, heads, T, e]: x cos(p ω) + rotate_half(x) sin(p ω), ω repeated over both halves, rotate_half
    (x1, x2) = (-x2, x1) (transformers' ``apply_rotary_pos_emb``). Angles in float32, as transformers takes them."""
    angles = tf.cast(positions, inverse.dtype)[:, tf.newaxis] * inverse[tf.newaxis, :]  # [T, e / 2]
    angles = tf.concat([angles, angles], -1)
    cos, sin = tf.cast(tf.cos(angles), x.dtype), tf.cast(tf.sin(angles), x.dtype)
    x1, x2 = tf.split(x, 2, axis=-1)
    return x * cos + tf.concat([-x2, x1], -1) * sin


class RMSNorm(keras.layers.Layer):
    """y = γ · x / sqrt(mean(x²) + ε) over the last axis, in float32 (transformers' LlamaRMSNorm), no bias.

    Example:
        >>> RMSNorm(epsilon=0.0)(tf.constant([[3.0, 4.0]])).numpy().round(3)
        array([[0.849, 1.131]], dtype=float32)
    """

    def __init__(self, epsilon: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        self.gamma = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="gamma")

    def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        x32 = tf.cast(x, tf.float32)
        normed = x32 * tf.math.rsqrt(tf.reduce_mean(tf.square(x32), -1, keepdims=True) + self.epsilon)
        return tf.cast(normed * tf.cast(self.gamma, tf.float32), self.compute_dtype)

    def get_config(self) -> dict:
        return {**super().get_config(), "epsilon": self.epsilon}


class GroupedQueryAttention(keras.layers.Layer):
    """Causal self-attention with ``n_kv_head`` key/value heads shared by ``n_head`` query heads (query head j reads
    key/value head j // (n_head / n_kv_head), transformers' ``repeat_kv``); q and k rotated by position.

    One bias-free projection makes q | k | v ([d, (h + 2g) e]), each by head; ``proj`` is the output ([h e, d]).

    Example:
        >>> attention = GroupedQueryAttention(d_model=64, n_head=4, n_kv_head=2)
        >>> attention(tf.zeros([1, 8, 64])).shape
        TensorShape([1, 8, 64])
    """

    def __init__(
        self,
        d_model: int,
        n_head: int,
        n_kv_head: int,
        rope_theta: float = 10_000.0,
        rope_scaling: dict | None = None,
        dropout: float = 0.0,
        output_init_std: float = 0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if d_model % n_head or n_head % n_kv_head:
            raise ValueError(f"n_head {n_head} must divide d_model {d_model} and n_kv_head {n_kv_head} n_head")
        self.d_model, self.n_head, self.n_kv_head, self.dropout = d_model, n_head, n_kv_head, dropout
        self.rope_theta, self.rope_scaling, self.output_init_std = rope_theta, rope_scaling, output_init_std
        self.head_dim = d_model // n_head
        self.inverse = inverse_frequencies(self.head_dim, rope_theta, rope_scaling)
        init = keras.initializers.RandomNormal(stddev=0.02)
        policy = self.dtype_policy
        width = (n_head + 2 * n_kv_head) * self.head_dim
        self.qkv = keras.layers.Dense(width, use_bias=False, kernel_initializer=init, dtype=policy, name="qkv")
        self.proj = keras.layers.Dense(
            d_model,
            use_bias=False,
            kernel_initializer=keras.initializers.RandomNormal(stddev=output_init_std),
            dtype=policy,
            name="proj",
        )

    def build(self, input_shape):
        self.qkv.build(input_shape)
        self.proj.build((*input_shape[:-1], self.n_head * self.head_dim))

    def heads(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """[B, T, d] -> q [B, h, T, e] (rotated, scaled by 1 / sqrt(e)), k (rotated) and v [B, g, T, e]."""
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        h, g, e = self.n_head, self.n_kv_head, self.head_dim
        qkv = tf.reshape(self.qkv(tf.reshape(x, [-1, self.d_model])), [batch, length, h + 2 * g, e])
        qkv = tf.transpose(qkv, [0, 2, 1, 3])
        q, k, v = qkv[:, :h], qkv[:, h : h + g], qkv[:, h + g :]
        positions, inverse = tf.range(length), tf.constant(self.inverse)
        q, k = rotate(q, positions, inverse), rotate(k, positions, inverse)
        return q * tf.cast(1 / math.sqrt(e), q.dtype), k, v

    def call(self, x: tf.Tensor, seed: tf.Tensor | None = None) -> tf.Tensor:
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        q, k, v = self.heads(x)
        group = self.n_head // self.n_kv_head
        if group > 1:
            k, v = tf.repeat(k, group, axis=1), tf.repeat(v, group, axis=1)
        out = causal_attention(q, k, v, self.dropout, seed)
        out = tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [-1, self.n_head * self.head_dim])
        return tf.reshape(self.proj(out), [batch, length, self.d_model])

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "d_model": self.d_model,
            "n_head": self.n_head,
            "n_kv_head": self.n_kv_head,
            "rope_theta": self.rope_theta,
            "rope_scaling": self.rope_scaling,
            "dropout": self.dropout,
            "output_init_std": self.output_init_std,
        }


class LlamaBlock(ResidualBlock):
    """One Llama block: RMSNorm, grouped-query attention, RMSNorm, SwiGLU MLP of width ``d_ff``, each with a residual.

    Args:
        d_model, n_head, n_kv_head, d_ff: the shape (``contract.presets.Preset``).
        rope_theta, rope_scaling: RoPE's base and config.json's scaling (``inverse_frequencies``).
        norm_epsilon: the RMSNorms' ε.
        dropout, n_layer, recompute, seed: as ``layers.DecoderBlock``'s.

    Example:
        >>> block = LlamaBlock(d_model=64, n_head=4, n_kv_head=2, d_ff=176)
        >>> block(tf.zeros([1, 8, 64])).shape
        TensorShape([1, 8, 64])
    """

    def __init__(
        self,
        d_model: int,
        n_head: int,
        n_kv_head: int,
        d_ff: int,
        rope_theta: float = 10_000.0,
        rope_scaling: dict | None = None,
        norm_epsilon: float = 1e-5,
        dropout: float = 0.0,
        n_layer: int = 1,
        recompute: str | bool = "none",
        seed: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.d_model, self.n_head, self.n_kv_head, self.d_ff = d_model, n_head, n_kv_head, d_ff
        self.rope_theta, self.rope_scaling, self.norm_epsilon = rope_theta, rope_scaling, norm_epsilon
        self.dropout, self.n_layer, self.recompute, self.seed = dropout, n_layer, recompute_mode(recompute), seed
        residual_std = 0.02 / math.sqrt(2 * n_layer)
        policy = self.dtype_policy
        self.ln_1 = RMSNorm(norm_epsilon, dtype=policy, name="ln_1")
        self.attn = GroupedQueryAttention(
            d_model, n_head, n_kv_head, rope_theta, rope_scaling, dropout, residual_std, dtype=policy, name="attn"
        )
        self.ln_2 = RMSNorm(norm_epsilon, dtype=policy, name="ln_2")
        init = keras.initializers.RandomNormal(stddev=0.02)
        self.gate_up = keras.layers.Dense(2 * d_ff, use_bias=False, kernel_initializer=init, dtype=policy, name="fc")
        self.down = keras.layers.Dense(
            d_model,
            use_bias=False,
            kernel_initializer=keras.initializers.RandomNormal(stddev=residual_std),
            dtype=policy,
            name="proj",
        )
        self.seed_generator = keras.random.SeedGenerator(seed, name="dropout_seed")

    def build(self, input_shape):
        self.ln_1.build(input_shape)
        self.attn.build(input_shape)
        self.ln_2.build(input_shape)
        self.gate_up.build(input_shape)
        self.down.build((*input_shape[:-1], self.d_ff))

    def mlp(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        """RMSNorm, then down(silu(gate) * up) on [B·T, d] rows; gate | up are one [d, 2 d_ff] matmul."""
        rows = tf.reshape(self.ln_2(x, training=training), [-1, self.d_model])
        gate, up = tf.split(self.gate_up(rows), 2, axis=-1)
        return tf.reshape(self.down(tf.nn.silu(gate) * up), tf.shape(x))

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "d_model": self.d_model,
            "n_head": self.n_head,
            "n_kv_head": self.n_kv_head,
            "d_ff": self.d_ff,
            "rope_theta": self.rope_theta,
            "rope_scaling": self.rope_scaling,
            "norm_epsilon": self.norm_epsilon,
            "dropout": self.dropout,
            "n_layer": self.n_layer,
            "recompute": self.recompute,
            "seed": self.seed,
        }
