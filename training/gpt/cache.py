"""Generation's key/value cache: a GPT's forward pass over new positions that reuses earlier positions' keys
and values (keras-hub's ``CausalLM.call_with_cache``). The model (``gpt/model.py``) knows nothing of it; this
module reads the model's layers and weights.

    cache [n_layer, 2, buckets, B, n_head, CACHE_BUCKET, head_dim]   each layer's keys, then its values,
                                                                    in buckets of CACHE_BUCKET positions
    call_with_cache(model, new ids, cache, index) -> logits of the new positions, the cache with them written

A prompt at index 0 and then one token at a time give the logits of ``model(whole sequence)``, at the cost of
the new positions only. Inference only (no dropout, no gradient).
"""

from __future__ import annotations

import tensorflow as tf

from gpt.layers import CausalSelfAttention, DecoderBlock, future_mask

CACHE_BUCKET = 64  # cached positions read per step: a multiple of this


def empty_cache(model, batch_size: int | tf.Tensor) -> tf.Tensor:
    """A zero cache for ``call_with_cache``: [n_layer, 2, buckets, B, n_head, CACHE_BUCKET, head_dim].

    Positions are held in buckets of CACHE_BUCKET (``buckets`` = sequence_length / CACHE_BUCKET, rounded up),
    each layer's keys, then its values, bucket after bucket in memory, so that the buckets a step reads are one
    contiguous block of the cache, which TensorFlow slices without copying.

    Args:
        model: a ``GPT``.
        batch_size: number of sequences (an int or a scalar tensor).

    Example:
        >>> from gpt.model import GPT
        >>> model = GPT.from_preset("tiny", vocab_size=512, sequence_length=32)
        >>> empty_cache(model, 2).shape
        TensorShape([2, 2, 1, 2, 2, 64, 32])
    """
    head_dim = model.d_model // model.n_head
    buckets = -(-model.sequence_length // CACHE_BUCKET)
    shape = [model.n_layer, 2, buckets, batch_size, model.n_head, CACHE_BUCKET, head_dim]
    return tf.zeros(shape, model.compute_dtype)


def call_with_cache(
    model, token_ids: tf.Tensor, cache: tf.Tensor, cache_update_index: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """Logits of T new tokens at positions ``cache_update_index ..``, reusing earlier positions' keys/values.

    ``cache_update_index + T`` must not exceed the model's ``sequence_length``.

    Args:
        model: a ``GPT``.
        token_ids: [B, T] int32, the new tokens.
        cache: from ``empty_cache`` or a previous call.
        cache_update_index: scalar int32, position of the first new token.

    Returns:
        (logits [B, T, vocab] float32, the updated cache).

    Example:
        >>> from gpt.model import GPT
        >>> model = GPT.from_preset("tiny", vocab_size=512, sequence_length=32)
        >>> logits, cache = call_with_cache(model, tf.constant([[1, 2, 3]]), empty_cache(model, 1), 0)
        >>> logits, cache = call_with_cache(model, tf.constant([[4]]), cache, 3)
        >>> logits.shape
        TensorShape([1, 1, 512])
    """
    index = tf.convert_to_tensor(cache_update_index, tf.int32)
    length = tf.shape(token_ids)[1]
    x = model.token_embedding(token_ids) + model.position_embedding(index + tf.range(length))[None]
    # The blocks read the buckets holding the positions written so far: the cost follows the tokens
    # written, and the attention's shapes repeat (one XLA program per bucket count, were the step compiled).
    # Viewed as [n_layer * 2 * buckets, ...], a layer's keys (or values) are a range of the first axis,
    # which TensorFlow slices without a copy (a copied prefix cost a generation step about a quarter).
    layers, _, buckets = cache.shape[:3]
    read = -(-index // CACHE_BUCKET)
    flat = tf.reshape(cache, [layers * 2 * buckets, -1, *cache.shape[4:]])  # -1: the batch
    written = []  # each block's keys/values of the new positions: [B, 2, n_head, T, head_dim]
    for i, block in enumerate(model.blocks):
        keys, values = (flat[(2 * i + kv) * buckets : (2 * i + kv) * buckets + read] for kv in (0, 1))
        x, new = block_with_cache(block, x, keys, values, index)
        written.append(new)
    logits = model.logits(x)
    # Written in place once every block has read the cache (the cache is not copied when nothing else holds
    # it, as in the generation loop).
    with tf.control_dependencies([logits]):
        new = tf.transpose(tf.stack(written), [0, 2, 1, 3, 4, 5])  # [n_layer, 2, B, n_head, T, head_dim]
        cache = _write_positions(cache, new, index, token_ids.shape[1])
    return logits, cache


def block_with_cache(
    block: DecoderBlock, x: tf.Tensor, keys: tf.Tensor, values: tf.Tensor, written: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """A decoder block on T new positions, reusing the cached keys/values of earlier ones.

    Args:
        block: the ``DecoderBlock``.
        x: [B, T, d_model], the residual stream of the new positions.
        keys, values: [m, B, n_head, C, head_dim] each, the first m buckets of this block's cache (see
            ``attention_with_cache``).
        written: scalar int32 <= m C, position of the first new token.

    Returns:
        ([B, T, d_model], [B, 2, n_head, T, head_dim] the new positions' keys and values).
    """
    attention, new = attention_with_cache(block.attn, block.ln_1(x), keys, values, written)
    x = x + attention
    return x + block.mlp(x, training=False), new


def attention_with_cache(
    attention: CausalSelfAttention, x: tf.Tensor, keys: tf.Tensor, values: tf.Tensor, written: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """Attention of T new positions over the cached keys/values of earlier ones.

    The T new positions are ``written .. written + T - 1``; they attend to the ``written`` positions before
    them and to themselves (causally). ``keys`` and ``values`` are the cache's first m buckets of C positions,
    at least ``written`` positions (those past ``written`` are ignored), so a step costs the positions written
    so far, not the cache's size. The caller writes the returned keys/values into the cache.

    Args:
        attention: the block's ``CausalSelfAttention``.
        x: [B, T, d_model], the new positions' (normalised) inputs.
        keys: [m, B, n_head, C, head_dim], cached keys of positions 0 .. m C - 1, bucket by bucket.
        values: [m, B, n_head, C, head_dim], their values.
        written: scalar int32 <= m C, how many of them are valid: the position of the first new token.

    Returns:
        ([B, T, d_model] output, [B, 2, n_head, T, head_dim] the new positions' keys and values).
    """
    q, k, v = attention.heads(x)
    attend = _attend_one if x.shape[1] == 1 else _attend
    return attend(attention, q, k, v, (keys, values), written), tf.stack([k, v], axis=1)


def _attend(attention: CausalSelfAttention, q, k, v, past: tuple, written) -> tf.Tensor:
    """T new positions (q, k, v [B, n_head, T, head_dim]) over the cached ``past`` and themselves -> [B, T, d].

    The scores over the past and over the T new keys are taken apart and share one softmax, so the cached keys
    and values are read where they lie, one batched matmul over the buckets, never copied together.
    """
    batch, queries, n_head = tf.shape(q)[0], tf.shape(q)[2], attention.n_head
    scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32)  # [B, n_head, T, T]
    if q.shape[2] != 1:  # a single query sees every key
        scores = tf.where(future_mask(queries), tf.float32.min, scores)
    past_k, past_v = past
    buckets, bucket_size = tf.shape(past_k)[0], tf.shape(past_k)[3]
    past_scores = tf.matmul(q[tf.newaxis], past_k, transpose_b=True)  # [m, B, n_head, T, C]
    past_scores = tf.reshape(tf.transpose(past_scores, [1, 2, 3, 0, 4]), [batch, n_head, queries, -1])
    valid = tf.range(buckets * bucket_size) < written
    scores = tf.concat([tf.where(valid, tf.cast(past_scores, tf.float32), tf.float32.min), scores], axis=-1)
    probs = tf.cast(tf.nn.softmax(scores, axis=-1), q.dtype)
    past_probs, probs = tf.split(probs, [buckets * bucket_size, queries], axis=-1)
    past_probs = tf.reshape(past_probs, [batch, n_head, queries, buckets, bucket_size])
    past_out = tf.matmul(tf.transpose(past_probs, [3, 0, 1, 2, 4]), past_v)  # [m, B, n_head, T, head_dim]
    return attention.merge_heads(tf.reduce_sum(past_out, 0) + tf.matmul(probs, v))


def _attend_one(attention: CausalSelfAttention, q, k, v, past: tuple, written) -> tf.Tensor:
    """``_attend`` for one new position (a generation step), q, k, v [B, n_head, 1, head_dim] -> [B, 1, d_model].

    The same softmax written out for one query, so that the scores over the cached buckets stay in the
    buckets' layout ([m, B, n_head, 1, C]) and the new position's own score and value are elementwise
    products: no transposes, no concatenation and split of the scores, two batched matmuls instead of four.
    """
    past_k, past_v = past
    buckets, size = tf.shape(past_k)[0], tf.shape(past_k)[3]
    f32 = tf.float32
    past_scores = tf.cast(tf.matmul(q[tf.newaxis], past_k, transpose_b=True), f32)  # [m, B, n_head, 1, C]
    unwritten = tf.where(tf.range(buckets * size) < written, 0.0, f32.min)  # selected on [m C], then added
    past_scores += tf.reshape(unwritten, [buckets, 1, 1, 1, size])
    own_score = tf.reduce_sum(tf.cast(q, f32) * tf.cast(k, f32), -1, keepdims=True)  # [B, n_head, 1, 1]
    top = tf.maximum(tf.reduce_max(past_scores, [0, 4], keepdims=True), own_score)  # [1, B, n_head, 1, 1]
    past_weights, own_weight = tf.exp(past_scores - top), tf.exp(own_score - top[0])
    total = tf.reduce_sum(past_weights, [0, 4], keepdims=True) + own_weight
    past_probs, own_prob = tf.cast(past_weights / total, v.dtype), tf.cast(own_weight / total[0], v.dtype)
    out = tf.reduce_sum(tf.matmul(past_probs, past_v), 0) + own_prob * v  # [B, n_head, 1, head_dim]
    d_model = attention.d_model  # [B, n_head, 1, head_dim] is [B, d_model] as it lies: no transpose
    return tf.reshape(attention.proj(tf.reshape(out, [-1, d_model])), [-1, 1, d_model])


def _all_axes_but(*axes: int, rank: int = 7) -> int:
    """A strided-slice mask that takes every axis whole except ``axes``."""
    return sum(1 << axis for axis in range(rank) if axis not in axes)


def _write_positions(cache: tf.Tensor, new: tf.Tensor, index: tf.Tensor, length: int | None) -> tf.Tensor:
    """``cache`` (bucketed, see ``empty_cache``) with ``new`` ([n_layer, 2, B, n_head, T, head_dim]) at
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
