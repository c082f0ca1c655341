"""Llama: the decoder of Llama 2/3, TinyLlama and SmolLM2, beside GPT (``architecture: llama`` in presets.json).

    token ids [B, T] -> token embedding -> dropout
      -> n_layer x LlamaBlock (RMSNorm, rotary grouped-query attention, RMSNorm, SwiGLU MLP; residuals)
      -> final RMSNorm -> logits [B, T, vocab] via the token embedding (tied) or a head of its own (untied)

No position embedding (the rotation is in the attention), no biases. Its weights are laid out as transformers'
``LlamaForCausalLM``'s (``export/llama_hf.py`` converts them both ways). Logits are float32, as GPT's.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from contract.hparams import recompute_mode
from contract.presets import get_preset

from gpt.layers import next_seed
from gpt.llama_layers import LlamaBlock, RMSNorm
from gpt.model import Decoder, padded_vocab


@keras.saving.register_keras_serializable(package="gpt")
class Llama(Decoder):
    """A Llama decoder.

    Args:
        vocab_size: number of token ids; the embeddings (and an untied head) have ``padded_vocab(vocab_size)`` rows.
        sequence_length: longest context (RoPE needs no table of it; kept for the data, export and serving).
        n_layer, d_model, n_head: the shape; head width d_model / n_head.
        n_kv_head: key/value heads (grouped-query attention), dividing n_head; n_head = multi-head attention.
        d_ff: the SwiGLU MLP's hidden width.
        rope_theta, rope_scaling: RoPE's base and config.json's scaling (``llama_layers.inverse_frequencies``).
        tie_embeddings: the output projection is the token embedding; otherwise a [vocab, d] ``lm_head``.
        norm_epsilon: the RMSNorms' ε.
        dropout, recompute, seed, dtype: as ``GPT``'s.

    Example:
        >>> model = Llama.from_preset("llama-tiny", vocab_size=512, sequence_length=32)
        >>> model(tf.zeros([2, 32], tf.int32)).shape
        TensorShape([2, 32, 512])
    """

    def __init__(
        self,
        vocab_size: int,
        sequence_length: int,
        n_layer: int,
        d_model: int,
        n_head: int,
        n_kv_head: int,
        d_ff: int,
        rope_theta: float = 10_000.0,
        rope_scaling: dict | None = None,
        tie_embeddings: bool = True,
        norm_epsilon: float = 1e-5,
        dropout: float = 0.0,
        recompute: str | bool = "none",
        seed: int = 0,
        dtype: str | None = None,
        **kwargs,
    ):
        super().__init__(dtype=dtype, **kwargs)
        self.vocab_size, self.sequence_length = vocab_size, sequence_length
        self.n_layer, self.d_model, self.n_head, self.n_kv_head, self.d_ff = n_layer, d_model, n_head, n_kv_head, d_ff
        self.rope_theta, self.rope_scaling = rope_theta, rope_scaling
        self.tie_embeddings, self.norm_epsilon = tie_embeddings, norm_epsilon
        self.dropout, self.recompute, self.seed = dropout, recompute_mode(recompute), seed
        init = keras.initializers.RandomNormal(stddev=0.02)
        policy = self.dtype_policy
        rows = padded_vocab(vocab_size)
        self.token_embedding = keras.layers.Embedding(
            rows, d_model, embeddings_initializer=init, dtype=policy, name="token_embedding"
        )
        # An untied head as [vocab, d] (transformers' lm_head.weight), projected onto as the tied one is.
        self.lm_head = (
            None
            if tie_embeddings
            else keras.layers.Embedding(rows, d_model, embeddings_initializer=init, dtype=policy, name="lm_head")
        )
        self.blocks = [
            LlamaBlock(
                d_model,
                n_head,
                n_kv_head,
                d_ff,
                rope_theta,
                rope_scaling,
                norm_epsilon,
                dropout,
                n_layer,
                recompute,
                seed + 16 * (i + 1),
                dtype=policy,
                name=f"h{i}",
            )
            for i in range(n_layer)
        ]
        self.ln_f = RMSNorm(norm_epsilon, dtype=policy, name="ln_f")
        self.seed_generator = keras.random.SeedGenerator(seed, name="embedding_dropout_seed")
        self.build((None, sequence_length))

    @classmethod
    def from_preset(cls, preset: str, *, vocab_size: int, sequence_length: int, **kwargs) -> Llama:
        """A model with a presets.json llama shape, e.g. ``Llama.from_preset("smollm2-135m", vocab_size=49152, ...)``;
        ``kwargs`` override the preset's arguments (``tie_embeddings=True``) and add the others (dropout ...)."""
        arguments = {**shape_arguments(get_preset(preset)), **kwargs}
        return cls(vocab_size=vocab_size, sequence_length=sequence_length, **arguments)

    def build(self, input_shape):
        hidden = (*input_shape[:2], self.d_model)
        self.token_embedding.build(input_shape)
        if self.lm_head is not None:
            self.lm_head.build(input_shape)
        for block in self.blocks:
            block.build(hidden)
        self.ln_f.build(hidden)
        self.built = True

    def embed(self, token_ids: tf.Tensor, training: bool = False, stream: tf.Tensor | None = None) -> tf.Tensor:
        """The token embedding, and dropout in training: [B, T] ids -> [B, T, d]."""
        x = self.token_embedding(token_ids)
        if training and self.dropout > 0:
            x = tf.nn.experimental.stateless_dropout(x, rate=self.dropout, seed=next_seed(self.seed_generator, stream))
        return x

    def output_embeddings(self) -> tf.Variable:
        return (self.token_embedding if self.lm_head is None else self.lm_head).embeddings

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "sequence_length": self.sequence_length,
            "n_layer": self.n_layer,
            "d_model": self.d_model,
            "n_head": self.n_head,
            "n_kv_head": self.n_kv_head,
            "d_ff": self.d_ff,
            "rope_theta": self.rope_theta,
            "rope_scaling": self.rope_scaling,
            "tie_embeddings": self.tie_embeddings,
            "norm_epsilon": self.norm_epsilon,
            "dropout": self.dropout,
            "recompute": self.recompute,
            "seed": self.seed,
        }


def shape_arguments(shape) -> dict:
    """A llama ``contract.presets.Preset``'s model arguments."""
    return {
        "n_layer": shape.n_layer,
        "d_model": shape.d_model,
        "n_head": shape.n_head,
        "n_kv_head": shape.kv_heads,
        "d_ff": shape.d_ff,
        "rope_theta": shape.rope_theta,
        "rope_scaling": shape.rope_scaling,
        "tie_embeddings": shape.tie_embeddings,
        "norm_epsilon": shape.norm_epsilon,
    }
