"""GPT: a decoder-only transformer language model (GPT-2/GPT-3 architecture).

    token ids [B, T] -> token embedding + position embedding -> dropout
      -> n_layer x DecoderBlock (pre-norm attention + MLP, residuals)
      -> final LayerNorm -> logits [B, T, vocab] via the token embedding, transposed (tied weights)

Logits come out in float32 whatever the compute precision, for a stable cross-entropy.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from contract.hparams import recompute_mode
from contract.presets import get_preset

from gpt.layers import DecoderBlock, LayerNorm, in_xla
from gpt.loss import sparse_cross_entropy

CACHE_BUCKET = 64  # cached positions read per step: a multiple of this
VOCAB_MULTIPLE = 64  # embedding rows: the vocabulary rounded up to a multiple of this (tensor-core-sized matmuls)


def padded_vocab(vocab_size: int) -> int:
    """The token embedding's rows for a vocabulary: 50,257 -> 50,304. The rows past ``vocab_size`` are never
    looked up, their logits are cut off before the softmax, and the exports leave them out."""
    return -(-vocab_size // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


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


def _all_axes_but(*axes: int, rank: int = 7) -> int:
    """A strided-slice mask that takes every axis whole except ``axes``."""
    return sum(1 << axis for axis in range(rank) if axis not in axes)


def _write_positions(cache: tf.Tensor, new: tf.Tensor, index: tf.Tensor, length: int | None) -> tf.Tensor:
    """``cache`` (bucketed, see ``GPT.empty_cache``) with ``new`` ([n_layer, 2, B, n_head, T, head_dim]) at
    positions ``index .. index + T - 1``; ``length`` is T where the trace knows it (1: the one-token path).

    One token (every generation step) is one in-place update of its slot in its bucket; several (a prompt),
    perhaps across buckets, rewrite the buckets they touch: laid out by position, updated and put back.
    """
    layers, _, _, _, heads, size, head_dim = cache.shape
    batch = tf.shape(cache)[3]
    bucket, offset = index // size, index % size
    update = tf.raw_ops.TensorStridedSliceUpdate
    if length == 1:
        begin = tf.stack([0, 0, bucket, 0, 0, offset, 0])
        mask = _all_axes_but(2, 5)
        value = new[:, :, tf.newaxis]
        return update(input=cache, begin=begin, end=begin + 1, strides=tf.ones([7], tf.int32), value=value,
                      begin_mask=mask, end_mask=mask)  # fmt: skip
    count = (index + tf.shape(new)[4] - 1) // size - bucket + 1
    touched = cache[:, :, bucket : bucket + count]  # [n_layer, 2, count, B, n_head, C, head_dim]
    by_position = tf.reshape(tf.transpose(touched, [0, 1, 3, 4, 2, 5, 6]), [layers, 2, batch, heads, -1, head_dim])
    begin, end = tf.stack([0, 0, 0, 0, offset, 0]), tf.stack([0, 0, 0, 0, offset + tf.shape(new)[4], 0])
    mask = _all_axes_but(4, rank=6)
    by_position = update(input=by_position, begin=begin, end=end, strides=tf.ones([6], tf.int32), value=new,
                         begin_mask=mask, end_mask=mask)  # fmt: skip
    touched = tf.reshape(by_position, [layers, 2, batch, heads, count, size, head_dim])
    begin, end = tf.stack([0, 0, bucket, 0, 0, 0, 0]), tf.stack([0, 0, bucket + count, 0, 0, 0, 0])
    mask = _all_axes_but(2)
    return update(input=cache, begin=begin, end=end, strides=tf.ones([7], tf.int32),
                  value=tf.transpose(touched, [0, 1, 4, 2, 3, 5, 6]), begin_mask=mask, end_mask=mask)  # fmt: skip


@keras.saving.register_keras_serializable(package="gpt")
class GPT(keras.Model):
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

        One [B*T, d] x [d, padded vocab] matmul: a batched matmul against the shared embedding would make its
        gradient a per-sequence [B, vocab, d] product summed over B, against the padded rows under XLA (their
        logits cut off), the real ones without.
        """
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        x = tf.reshape(self.ln_f(x), [-1, self.d_model])
        embeddings = self.token_embedding.embeddings
        if embeddings.shape[0] != self.vocab_size and not in_xla():
            embeddings = embeddings[: self.vocab_size]  # uncompiled, cutting the logits would copy [B*T, vocab]
        logits = _tied_projection(x, tf.cast(embeddings, x.dtype))
        if self.vocab_size != logits.shape[-1]:  # under XLA the cut fuses into the loss
            logits = logits[:, : self.vocab_size]
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
        """A zero key/value cache for ``call_with_cache``: [n_layer, 2, buckets, B, n_head, CACHE_BUCKET, head_dim].

        Positions are held in buckets of CACHE_BUCKET (``buckets`` = sequence_length / CACHE_BUCKET, rounded
        up), each layer's keys, then its values, bucket after bucket in memory, so that the buckets a step
        reads are one contiguous block of the cache, which TensorFlow slices without copying.

        Args:
            batch_size: number of sequences (an int or a scalar tensor).

        Example:
            >>> model = GPT.from_preset("tiny", vocab_size=512, sequence_length=32)
            >>> model.empty_cache(2).shape
            TensorShape([2, 2, 1, 2, 2, 64, 32])
        """
        head_dim = self.d_model // self.n_head
        buckets = -(-self.sequence_length // CACHE_BUCKET)
        shape = [self.n_layer, 2, buckets, batch_size, self.n_head, CACHE_BUCKET, head_dim]
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
            cache: from ``empty_cache`` or a previous call.
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
        index = tf.convert_to_tensor(cache_update_index, tf.int32)
        length = tf.shape(token_ids)[1]
        x = self.token_embedding(token_ids) + self.position_embedding(index + tf.range(length))[None]
        # The blocks read the buckets holding the positions written so far: the cost follows the tokens
        # written, and the attention's shapes repeat (one XLA program per bucket count, were the step compiled).
        # Viewed as [n_layer * 2 * buckets, ...], a layer's keys (or values) are a range of the first axis,
        # which TensorFlow slices without a copy (a copied prefix cost a generation step about a quarter).
        layers, _, buckets = cache.shape[:3]
        read = -(-index // CACHE_BUCKET)
        flat = tf.reshape(cache, [layers * 2 * buckets, -1, *cache.shape[4:]])  # -1: the batch
        written = []  # each block's keys/values of the new positions: [B, 2, n_head, T, head_dim]
        for i, block in enumerate(self.blocks):
            keys, values = (flat[(2 * i + kv) * buckets : (2 * i + kv) * buckets + read] for kv in (0, 1))
            x, new = block.call_with_cache(x, keys, values, index)
            written.append(new)
        logits = self.logits(x)
        # Written in place once every block has read the cache (the cache is not copied when nothing else holds
        # it, as in the generation loop).
        with tf.control_dependencies([logits]):
            new = tf.transpose(tf.stack(written), [0, 2, 1, 3, 4, 5])  # [n_layer, 2, B, n_head, T, head_dim]
            cache = _write_positions(cache, new, index, token_ids.shape[1])
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
