import numpy as np
import pytest
import tensorflow as tf

from gpt.cache import call_with_cache, empty_cache
from gpt.model import GPT


@pytest.fixture(scope="module")
def model():
    return GPT.from_preset("tiny", vocab_size=50, sequence_length=16, seed=1)


def test_cached_logits_equal_full_forward_pass(model):
    ids = tf.constant([[1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14]])
    logits, cache = call_with_cache(model, ids[:, :4], empty_cache(model, 2), 0)
    steps = [logits]
    for t in range(4, 7):
        logits, cache = call_with_cache(model, ids[:, t : t + 1], cache, t)
        steps.append(logits)
    np.testing.assert_allclose(tf.concat(steps, 1).numpy(), model(ids).numpy(), atol=1e-5)
    assert cache.shape == (2, 2, 1, 2, 2, 64, 32)  # [layer, key/value, bucket, batch, head, position, head_dim]
    # Positions not written yet stay zero.
    assert not np.any(cache[:, :, :, :, :, 7:].numpy()) and np.all(np.any(cache[:, :, :, :, :, :7].numpy(), -1))


def test_chunks_across_buckets_equal_full_forward_pass():
    """A prompt in two chunks, the second crossing from the first bucket of 64 positions into the second,
    then single tokens: the same logits as one pass, and only the positions fed are written."""
    model = GPT.from_preset("tiny", vocab_size=50, sequence_length=130, seed=3)
    ids = tf.random.stateless_uniform([2, 72], seed=[1, 2], maxval=50, dtype=tf.int32)
    logits_a, cache = call_with_cache(model, ids[:, :60], empty_cache(model, 2), 0)
    logits_b, cache = call_with_cache(model, ids[:, 60:70], cache, 60)
    steps = [logits_a, logits_b]
    for t in (70, 71):
        logits, cache = call_with_cache(model, ids[:, t : t + 1], cache, t)
        steps.append(logits)
    np.testing.assert_allclose(tf.concat(steps, 1).numpy(), model(ids).numpy(), atol=1e-5)
    by_position = np.concatenate(list(np.moveaxis(cache.numpy(), 2, 0)), axis=-2)  # buckets side by side
    assert by_position.shape[-2] == 3 * 64
    assert np.all(np.any(by_position[..., :72, :], -1)) and not np.any(by_position[..., 72:, :])
