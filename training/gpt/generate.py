"""Autoregressive generation inside the graph (``tf.while_loop``), with a key/value cache.

With the cache, the prompt goes through the model once (filling the cache) and then every new token is
one forward step of a single position: n new tokens cost n one-token steps, not n passes over the
context. The cache has the model's fixed context (``sequence_length``) and absolute positions, so it
serves prompt + new tokens <= sequence_length; a longer generation falls back to the loop without the
cache, which re-reads the last ``sequence_length`` tokens for every new one (a sliding window).

Decoding: greedy when temperature is 0, else sampling from softmax(logits / temperature), optionally
restricted to the ``top_k`` most likely tokens. Sampling is stateless: step i draws with the seed
(seed, i), so the same seed gives the same tokens with or without the cache.
"""

from __future__ import annotations

import tensorflow as tf

from gpt.cache import call_with_cache, empty_cache


def next_token(logits: tf.Tensor, temperature: tf.Tensor, top_k: tf.Tensor, seed: tf.Tensor, step: tf.Tensor):
    """Picks one token per row of ``logits`` [B, vocab]; returns [B] int32.

    Args:
        logits: [B, vocab] float32, the last position's logits.
        temperature: scalar float32; 0 = argmax, > 0 = sample from softmax(logits / temperature).
        top_k: scalar int32; > 0 keeps only the k largest logits before sampling, 0 keeps all.
        seed: scalar int32, the request's seed.
        step: scalar int32, the index of the new token (the second half of the stateless seed).

    Example:
        >>> next_token(tf.constant([[0.0, 2.0, 1.0]]), tf.constant(0.0), tf.constant(0), tf.constant(0), 0)
        <tf.Tensor: shape=(1,), dtype=int32, numpy=array([1], dtype=int32)>
    """

    def keep_top_k() -> tf.Tensor:
        k = tf.minimum(top_k, tf.shape(logits)[-1])
        kth_largest = tf.math.top_k(logits, k).values[:, -1:]
        return tf.where(logits < kth_largest, tf.float32.min, logits)

    def sampled() -> tf.Tensor:
        filtered = tf.cond(top_k > 0, keep_top_k, lambda: logits)
        draw = tf.random.stateless_categorical(filtered / temperature, 1, seed=tf.stack([seed, step]))
        return tf.cast(draw[:, 0], tf.int32)

    greedy = lambda: tf.argmax(logits, axis=-1, output_type=tf.int32)  # noqa: E731
    return tf.cond(temperature > 0, sampled, greedy)


def generate(
    model,
    prompt_ids: tf.Tensor,
    max_new_tokens: tf.Tensor,
    temperature: tf.Tensor,
    seed: tf.Tensor,
    top_k: tf.Tensor | int = 0,
    use_cache: bool = True,
) -> tf.Tensor:
    """Continues each prompt by ``max_new_tokens`` tokens; returns only the continuation, [B, max_new_tokens] int32.

    Args:
        model: a GPT (the cached loop runs it through ``gpt.cache``).
        prompt_ids: [B, P] int32 token ids, P >= 1.
        max_new_tokens: scalar int32, how many tokens to add.
        temperature: scalar float32; 0 picks the most likely token (greedy), > 0 samples from softmax(logits / t).
        seed: scalar int32; sampling is stateless, so the same seed gives the same text.
        top_k: scalar int32; > 0 samples among the k most likely tokens only; 0 = all.
        use_cache: reuse keys/values across steps while prompt + new tokens fit the context (Python bool).

    Example:
        >>> from gpt.model import GPT
        >>> model = GPT.from_preset("tiny", vocab_size=64, sequence_length=16)
        >>> generate(model, tf.constant([[0]]), tf.constant(5), tf.constant(0.0), tf.constant(0)).shape
        TensorShape([1, 5])
    """
    prompt_ids = tf.cast(prompt_ids, tf.int32)
    max_new_tokens = tf.convert_to_tensor(max_new_tokens, tf.int32)
    temperature = tf.convert_to_tensor(temperature, tf.float32)
    seed = tf.convert_to_tensor(seed, tf.int32)
    top_k = tf.convert_to_tensor(top_k, tf.int32)
    args = (model, prompt_ids, max_new_tokens, temperature, seed, top_k)
    if not use_cache:
        return generate_without_cache(*args)
    fits = tf.shape(prompt_ids)[1] + max_new_tokens <= model.sequence_length
    return tf.cond(fits, lambda: generate_with_cache(*args), lambda: generate_without_cache(*args))


def generate_with_cache(model, prompt_ids, max_new_tokens, temperature, seed, top_k) -> tf.Tensor:
    """The cached loop: one pass over the prompt, then one single-token step per new token.

    Needs prompt length + max_new_tokens <= model.sequence_length (``generate`` checks). Arguments as
    ``generate``'s, all tensors.
    """
    batch, prompt_length = tf.shape(prompt_ids)[0], tf.shape(prompt_ids)[1]
    logits, cache = call_with_cache(model, prompt_ids, empty_cache(model, batch), 0)

    def body(i, last_logits, cache, ids):
        token = next_token(last_logits, temperature, top_k, seed, i)
        logits, cache = call_with_cache(model, token[:, tf.newaxis], cache, prompt_length + i)
        return i + 1, logits[:, -1, :], cache, tf.concat([ids, token[:, tf.newaxis]], axis=1)

    _, _, _, ids = tf.while_loop(
        lambda i, *_: i < max_new_tokens,
        body,
        (tf.constant(0), logits[:, -1, :], cache, tf.zeros([batch, 0], tf.int32)),
        shape_invariants=(
            tf.TensorShape([]),
            tf.TensorShape([None, model.vocab_size]),
            tf.TensorShape([*cache.shape[:3], None, *cache.shape[4:]]),  # the batch is the cache's fourth axis
            tf.TensorShape([None, None]),
        ),
    )
    return ids


def generate_without_cache(model, prompt_ids, max_new_tokens, temperature, seed, top_k) -> tf.Tensor:
    """The reference loop: every new token is a full forward pass over the last ``sequence_length`` tokens.

    Works for any length (the window slides past the context). Arguments as ``generate``'s, all tensors.
    """
    window = model.sequence_length
    batch = tf.shape(prompt_ids)[0]

    def body(i, ids):
        logits = model(ids[:, -window:], training=False)[:, -1, :]  # [B, vocab], float32
        token = next_token(logits, temperature, top_k, seed, i)
        return i + 1, tf.concat([ids, token[:, tf.newaxis]], axis=1)

    _, ids = tf.while_loop(
        lambda i, _: i < max_new_tokens,
        body,
        (tf.constant(0), prompt_ids),
        shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, None])),
    )
    return tf.reshape(ids[:, tf.shape(prompt_ids)[1] :], [batch, -1])
