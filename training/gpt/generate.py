"""Autoregressive generation without a KV cache: each new token re-reads the last ``sequence_length`` tokens.

Cost per new token is one forward pass over the window; a later version adds a KV cache.
"""

from __future__ import annotations

import tensorflow as tf


def generate(
    model, prompt_ids: tf.Tensor, max_new_tokens: tf.Tensor, temperature: tf.Tensor, seed: tf.Tensor
) -> tf.Tensor:
    """Continues each prompt by ``max_new_tokens`` tokens; returns only the continuation, [B, max_new_tokens] int32.

    Args:
        model: a GPT (any Keras model mapping [B, T] ids to [B, T, vocab] logits with a ``sequence_length``).
        prompt_ids: [B, P] int32 token ids, P >= 1.
        max_new_tokens: scalar int32, how many tokens to add.
        temperature: scalar float32; 0 picks the most likely token (greedy), > 0 samples from softmax(logits / t).
        seed: scalar int32; sampling is stateless, so the same seed gives the same text.

    Example:
        >>> generate(model, tf.constant([[0]]), tf.constant(5), tf.constant(0.0), tf.constant(0)).shape
        TensorShape([1, 5])
    """
    prompt_ids = tf.cast(prompt_ids, tf.int32)
    window = model.sequence_length
    batch = tf.shape(prompt_ids)[0]

    def next_token(ids: tf.Tensor, i: tf.Tensor) -> tf.Tensor:
        logits = model(ids[:, -window:], training=False)[:, -1, :]  # [B, vocab], float32
        greedy = lambda: tf.argmax(logits, axis=-1, output_type=tf.int32)  # noqa: E731
        sampled = lambda: tf.cast(  # noqa: E731
            tf.random.stateless_categorical(logits / tf.maximum(temperature, 1e-6), 1, seed=tf.stack([seed, i]))[:, 0],
            tf.int32,
        )
        return tf.cond(temperature > 0, sampled, greedy)

    def body(i, ids):
        return i + 1, tf.concat([ids, next_token(ids, i)[:, tf.newaxis]], axis=1)

    _, ids = tf.while_loop(
        lambda i, _: i < max_new_tokens,
        body,
        (tf.constant(0), prompt_ids),
        shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, None])),
    )
    return tf.reshape(ids[:, tf.shape(prompt_ids)[1] :], [batch, -1])
