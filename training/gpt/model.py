"""GPT: a decoder-only transformer language model (GPT-2/GPT-3 architecture).

    token ids [B, T] -> token embedding + position embedding -> dropout
      -> n_layer x DecoderBlock (pre-norm attention + MLP, residuals)
      -> final LayerNorm -> logits [B, T, vocab] via the token embedding, transposed (tied weights)

Logits come out in float32 whatever the compute precision, for a stable cross-entropy.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from gpt.layers import DecoderBlock, LayerNorm
from gpt.loss import sparse_cross_entropy
from gpt.presets import get_preset

CACHE_BUCKET = 64  # cached positions read per step: a multiple of this


@tf.custom_gradient
def _tied_projection(x: tf.Tensor, embeddings: tf.Tensor):
    """x [N, d] @ embeddings [vocab, d]ᵀ -> [N, vocab], its embedding gradient as (xᵀ g)ᵀ.

    The gradient autodiff writes, gᵀ x ([vocab, N] x [N, d] -> [vocab, d]), took 21.5 ms on this CPU at
    N = 1024, d = 256, vocab = 8192; xᵀ g ([d, N] x [N, vocab]) and a transpose of the [d, vocab] result,
    19.2 ms: the same products summed in another order.
    """

    def grad(g):
        return tf.matmul(g, embeddings), tf.transpose(tf.matmul(x, g, transpose_a=True))

    return tf.matmul(x, embeddings, transpose_b=True), grad


@keras.saving.register_keras_serializable(package="gpt")
class GPT(keras.Model):
    """A GPT decoder.

    Args:
        vocab_size: number of token ids (the tokenizer's vocabulary, or more).
        sequence_length: longest context; the size of the position embedding.
        n_layer: number of decoder blocks.
        d_model: width of the residual stream; the MLP is 4 x d_model wide.
        n_head: attention heads per block.
        dropout: dropout rate after the embeddings and inside each block. 0 disables it.
        recompute: recompute each block's activations in the backward pass (saves memory).
        seed: seed of the dropout SeedGenerators (block i uses seed + 16 i).
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
        recompute: bool = False,
        seed: int = 0,
        dtype: str | None = None,
        **kwargs,
    ):
        super().__init__(dtype=dtype, **kwargs)
        self.vocab_size, self.sequence_length = vocab_size, sequence_length
        self.n_layer, self.d_model, self.n_head = n_layer, d_model, n_head
        self.dropout, self.recompute, self.seed = dropout, recompute, seed
        init = keras.initializers.RandomNormal(stddev=0.02)
        policy = self.dtype_policy
        self.token_embedding = keras.layers.Embedding(
            vocab_size, d_model, embeddings_initializer=init, dtype=policy, name="token_embedding"
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

    def call(self, token_ids: tf.Tensor, training: bool = False) -> tf.Tensor:
        return self.logits(self.hidden_states(token_ids, training))

    def hidden_states(self, token_ids: tf.Tensor, training: bool = False) -> tf.Tensor:
        """The residual stream after the last block, before the final LayerNorm: [B, T] ids -> [B, T, d]."""
        length = tf.shape(token_ids)[1]
        x = self.token_embedding(token_ids) + self.position_embedding(tf.range(length))[tf.newaxis]
        if training and self.dropout > 0:
            seed = self.seed_generator.next()
            x = tf.nn.experimental.stateless_dropout(x, rate=self.dropout, seed=seed)
        for block in self.blocks:
            x = block(x, training=training)
        return x

    def logits(self, x: tf.Tensor) -> tf.Tensor:
        """Final LayerNorm and the tied output projection: [B, T, d] -> [B, T, vocab] float32.

        One [B*T, d] x [d, vocab] matmul: a batched matmul against the shared embedding would make its
        gradient a per-sequence [B, vocab, d] product summed over B.
        """
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        x = tf.reshape(self.ln_f(x), [-1, self.d_model])
        logits = _tied_projection(x, tf.cast(self.token_embedding.embeddings, x.dtype))
        return tf.reshape(tf.cast(logits, tf.float32), [batch, length, self.vocab_size])

    def loss_sum(self, token_ids: tf.Tensor, targets: tf.Tensor, training: bool = False) -> tf.Tensor:
        """Sum over positions of the next-token cross-entropy, float32: the value and gradient of
        ``reduce_sum(sparse_softmax_cross_entropy_with_logits(targets, self(token_ids)))`` at a fraction of the
        cost of TensorFlow's fused kernel on a CPU (``gpt/loss.py``).

        Args:
            token_ids: [B, T] int32 inputs.
            targets: [B, T] int32, the token that follows each input position.
            training: dropout on.

        Example:
            >>> model = GPT.from_preset("tiny", vocab_size=512, sequence_length=32)
            >>> ids = tf.zeros([2, 33], tf.int32)
            >>> model.loss_sum(ids[:, :-1], ids[:, 1:]).shape
            TensorShape([])
        """
        logits = tf.reshape(self(token_ids, training=training), [-1, self.vocab_size])
        return tf.reduce_sum(sparse_cross_entropy(tf.reshape(targets, [-1]), logits))

    def empty_cache(self, batch_size: int | tf.Tensor) -> tf.Tensor:
        """A zero key/value cache for ``call_with_cache``: [B, n_layer, 2, n_head, sequence_length, head_dim].

        Args:
            batch_size: number of sequences (an int or a scalar tensor).

        Example:
            >>> model = GPT.from_preset("tiny", vocab_size=512, sequence_length=32)
            >>> model.empty_cache(2).shape
            TensorShape([2, 2, 2, 2, 32, 32])
        """
        head_dim = self.d_model // self.n_head
        shape = [batch_size, self.n_layer, 2, self.n_head, self.sequence_length, head_dim]
        return tf.zeros(shape, self.compute_dtype)

    def call_with_cache(
        self, token_ids: tf.Tensor, cache: tf.Tensor, cache_update_index: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Logits of T new tokens at positions ``cache_update_index ..``, reusing earlier positions' keys/values.

        Feeding a prompt at index 0 and then one token at a time gives the same logits as ``call`` on the
        whole sequence, at the cost of one position per step instead of the whole sequence. Inference only
        (no dropout); ``cache_update_index + T`` must not exceed ``sequence_length``.

        Args:
            token_ids: [B, T] int32, the new tokens.
            cache: [B, n_layer, 2, n_head, sequence_length, head_dim], from ``empty_cache`` or a previous call.
            cache_update_index: scalar int32, position of the first new token.

        Returns:
            (logits [B, T, vocab] float32, the updated cache).

        Example:
            >>> model = GPT.from_preset("tiny", vocab_size=512, sequence_length=32)
            >>> logits, cache = model.call_with_cache(tf.constant([[1, 2, 3]]), model.empty_cache(1), 0)
            >>> logits, cache = model.call_with_cache(tf.constant([[4]]), cache, 3)
            >>> logits.shape
            TensorShape([1, 1, 512])
        """
        cache_update_index = tf.convert_to_tensor(cache_update_index, tf.int32)
        length = tf.shape(token_ids)[1]
        x = self.token_embedding(token_ids) + self.position_embedding(cache_update_index + tf.range(length))[None]
        # The blocks read the cache's first positions up to a multiple of CACHE_BUCKET at or above those
        # written: the cost follows the tokens written, and the attention's shapes repeat (one XLA program per
        # bucket, were the step compiled; on this CPU buckets of 1 to 128 positions ran equally fast).
        prefix = tf.minimum(-(-cache_update_index // CACHE_BUCKET) * CACHE_BUCKET, self.sequence_length)
        written = []  # each block's keys/values of the new positions: [B, 2, n_head, T, head_dim]
        for i, block in enumerate(self.blocks):
            x, new = block.call_with_cache(
                x, cache[:, i, 0, :, :prefix], cache[:, i, 1, :, :prefix], cache_update_index
            )
            written.append(new)
        logits = self.logits(x)
        # Write them at positions index .. index + T - 1, in place once every block has read the cache (the
        # rest of the cache is not copied when nothing else holds it, as in the generation loop).
        with tf.control_dependencies([logits]):
            begin = tf.stack([0, 0, 0, 0, cache_update_index, 0])
            end = tf.stack([0, 0, 0, 0, cache_update_index + length, 0])
            cache = tf.raw_ops.TensorStridedSliceUpdate(
                input=cache, begin=begin, end=end, strides=tf.ones([6], tf.int32), value=tf.stack(written, axis=1),
                begin_mask=0b101111, end_mask=0b101111,
            )  # fmt: skip
        return logits, cache

    def seed_state_variables(self) -> list:
        """The dropout SeedGenerators' state variables, which a checkpoint must hold for dropout to resume exactly."""
        return [v for v in self.non_trainable_variables if "seed_generator_state" in v.path]

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
