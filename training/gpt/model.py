"""GPT: a decoder-only transformer language model (GPT-2/GPT-3 architecture).

    token ids [B, T] -> token embedding + position embedding -> dropout
      -> n_layer x DecoderBlock (pre-norm attention + MLP, residuals)
      -> final LayerNorm -> logits [B, T, vocab] via the token embedding, transposed (tied weights)

Logits come out in float32 whatever the compute precision, for a stable cross-entropy.
Generation's key/value cache is beside the model, in ``gpt/cache.py``.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from contract.hparams import recompute_mode
from contract.presets import get_preset

from gpt.layers import DecoderBlock, LayerNorm, in_xla, next_seed
from gpt.loss import sparse_cross_entropy

VOCAB_MULTIPLE = 64  # embedding rows: the vocabulary rounded up to a multiple of this (tensor-core-sized matmuls)


def padded_vocab(vocab_size: int) -> int:
    """The token embedding's rows for a vocabulary: 50,257 -> 50,304. The rows past ``vocab_size`` are never
    looked up, their logits are cut off before the softmax, and the exports leave them out."""
    return -(-vocab_size // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


@tf.custom_gradient
def _tied_projection(x: tf.Tensor, embeddings: tf.Tensor):
    """x [N, d] @ embeddings [vocab, d]ᵀ -> [N, vocab], its embedding gradient as (xᵀ g)ᵀ: the products of
    autodiff's gᵀ x summed in another order, faster on a CPU (training/README.md, "Measurements")."""

    def grad(g):
        d_embeddings = tf.transpose(tf.matmul(x, g, transpose_a=True))
        # The input's gradient after the embedding's: the blocks' backward pass waits on it, the embedding's
        # gradient on nothing, so TensorFlow's executor ran that last, keeping g ([N, vocab] float32) alive through
        # every block's backward pass (docs/benchmarks.md, "The recomputed case").
        with tf.control_dependencies([d_embeddings]):
            return tf.matmul(g, embeddings), d_embeddings

    return tf.matmul(x, embeddings, transpose_b=True), grad


class Decoder(keras.Model):
    """What GPT and Llama share: ids -> ``embed`` -> ``blocks`` -> ``ln_f`` -> the projection onto
    ``output_embeddings()`` ([padded vocab, d]: the token embedding, or an untied head), and the loss."""

    def call(self, token_ids: tf.Tensor, training: bool = False, stream: tf.Tensor | None = None) -> tf.Tensor:
        """[B, T] ids -> [B, T, vocab] float32 logits; ``stream``: the data-parallel replica drawing the dropout
        masks in training (``layers.next_seed``; None: one stream)."""
        return self.logits(self.hidden_states(token_ids, training, stream))

    def hidden_states(self, token_ids: tf.Tensor, training: bool = False, stream: tf.Tensor | None = None) -> tf.Tensor:
        """The residual stream after the last block, before the final norm: [B, T] ids -> [B, T, d]."""
        x = self.embed(token_ids, training, stream)
        for block in self.blocks:
            x = block(x, training=training, stream=stream)
        return x

    def logits(self, x: tf.Tensor) -> tf.Tensor:
        """Final norm and the output projection (tied in GPT): [B, T, d] -> [B, T, vocab] float32.

        One [B*T, d] x [d, padded vocab] matmul: a batched matmul against the shared embedding would make its
        gradient a per-sequence [B, vocab, d] product summed over B, against the padded rows under XLA (their
        logits cut off), the real ones without.
        """
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        x = tf.reshape(self.ln_f(x), [-1, self.d_model])
        embeddings = self.output_embeddings()
        if embeddings.shape[0] != self.vocab_size and not in_xla():
            embeddings = embeddings[: self.vocab_size]  # uncompiled, cutting the logits would copy [B*T, vocab]
        logits = _tied_projection(x, tf.cast(embeddings, x.dtype))
        if self.vocab_size != logits.shape[-1]:  # under XLA the cut fuses into the loss
            logits = logits[:, : self.vocab_size]
        return tf.reshape(tf.cast(logits, tf.float32), [batch, length, self.vocab_size])

    def loss_sum(
        self, token_ids: tf.Tensor, targets: tf.Tensor, training: bool = False, stream: tf.Tensor | None = None
    ) -> tf.Tensor:
        """Sum over positions of the next-token cross-entropy, float32: the value and gradient of
        ``reduce_sum(sparse_softmax_cross_entropy_with_logits(targets, self(token_ids)))`` at a fraction of the
        cost of TensorFlow's fused kernel on a CPU (``gpt/loss.py``).

        Args:
            token_ids: [B, T] int32 inputs.
            targets: [B, T] int32, the token that follows each input position.
            training: dropout on.
            stream: the data-parallel replica drawing the dropout masks (``call``).

        Example:
            >>> model = GPT.from_preset("tiny", vocab_size=512, sequence_length=32)
            >>> ids = tf.zeros([2, 33], tf.int32)
            >>> model.loss_sum(ids[:, :-1], ids[:, 1:]).shape
            TensorShape([])
        """
        logits = tf.reshape(self(token_ids, training=training, stream=stream), [-1, self.vocab_size])
        return tf.reduce_sum(sparse_cross_entropy(tf.reshape(targets, [-1]), logits))

    def seed_state_variables(self) -> list:
        """The dropout SeedGenerators' state variables, which a checkpoint must hold for dropout to resume exactly."""
        return [v for v in self.non_trainable_variables if "seed_generator_state" in v.path]

    def output_embeddings(self) -> tf.Variable:
        """The output projection's [padded vocab, d] weights."""
        raise NotImplementedError


@keras.saving.register_keras_serializable(package="gpt")
class GPT(Decoder):
    """A GPT decoder.

    Args:
        vocab_size: number of token ids (the tokenizer's vocabulary, or more); the token embedding has
            ``padded_vocab(vocab_size)`` rows, the logits ``vocab_size`` columns.
        sequence_length: longest context; the size of the position embedding.
        n_layer: number of decoder blocks.
        d_model: width of the residual stream; the MLP is 4 x d_model wide.
        n_head: attention heads per block.
        dropout: dropout rate after the embeddings and inside each block. 0 disables it.
        recompute: what each block recomputes in the backward pass: none, attention, mlp or full (true = full,
            false = none; ``DecoderBlock``).
        seed: seed of the dropout SeedGenerators (the embeddings' seed, block i's seed + 16 (i + 1)).
        dtype: a Keras dtype policy: "float32", "mixed_bfloat16" or "mixed_float16".

    Example:
        >>> model = GPT.from_preset("tiny", vocab_size=512, sequence_length=32)
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
        dropout: float = 0.0,
        recompute: str | bool = "none",
        seed: int = 0,
        dtype: str | None = None,
        **kwargs,
    ):
        super().__init__(dtype=dtype, **kwargs)
        self.vocab_size, self.sequence_length = vocab_size, sequence_length
        self.n_layer, self.d_model, self.n_head = n_layer, d_model, n_head
        self.dropout, self.recompute, self.seed = dropout, recompute_mode(recompute), seed
        init = keras.initializers.RandomNormal(stddev=0.02)
        policy = self.dtype_policy
        self.token_embedding = keras.layers.Embedding(
            padded_vocab(vocab_size), d_model, embeddings_initializer=init, dtype=policy, name="token_embedding"
        )
        self.position_embedding = keras.layers.Embedding(
            sequence_length,
            d_model,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=0.01),
            dtype=policy,
            name="position_embedding",
        )
        self.blocks = [
            DecoderBlock(d_model, n_head, dropout, n_layer, recompute, seed + 16 * (i + 1), dtype=policy, name=f"h{i}")
            for i in range(n_layer)
        ]
        self.ln_f = LayerNorm(epsilon=1e-5, dtype=policy, name="ln_f")
        self.seed_generator = keras.random.SeedGenerator(seed, name="embedding_dropout_seed")
        self.build((None, sequence_length))

    @classmethod
    def from_preset(cls, preset: str, *, vocab_size: int, sequence_length: int, **kwargs) -> GPT:
        """A model with a presets.json shape, e.g. ``GPT.from_preset("gpt3-125m", vocab_size=50257, ...)``."""
        shape = get_preset(preset)
        return cls(
            vocab_size=vocab_size,
            sequence_length=sequence_length,
            n_layer=shape.n_layer,
            d_model=shape.d_model,
            n_head=shape.n_head,
            **kwargs,
        )

    def build(self, input_shape):
        hidden = (*input_shape[:2], self.d_model)
        self.token_embedding.build(input_shape)
        self.position_embedding.build((self.sequence_length,))
        for block in self.blocks:
            block.build(hidden)
        self.ln_f.build(hidden)
        self.built = True

    def embed(self, token_ids: tf.Tensor, training: bool = False, stream: tf.Tensor | None = None) -> tf.Tensor:
        """Token + position embeddings, and dropout in training: [B, T] ids -> [B, T, d]."""
        length = tf.shape(token_ids)[1]
        x = self.token_embedding(token_ids) + self.position_embedding(tf.range(length))[tf.newaxis]
        if training and self.dropout > 0:
            x = tf.nn.experimental.stateless_dropout(x, rate=self.dropout, seed=next_seed(self.seed_generator, stream))
        return x

    def output_embeddings(self) -> tf.Variable:
        return self.token_embedding.embeddings

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "sequence_length": self.sequence_length,
            "n_layer": self.n_layer,
            "d_model": self.d_model,
            "n_head": self.n_head,
            "dropout": self.dropout,
            "recompute": self.recompute,
            "seed": self.seed,
        }
