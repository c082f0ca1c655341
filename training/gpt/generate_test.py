import numpy as np
import pytest
import tensorflow as tf

from gpt.generate import generate, next_token
from gpt.model import GPT


@pytest.fixture(scope="module")
def model():
    return GPT.from_preset("tiny", vocab_size=50, sequence_length=16, seed=1)


def reference_greedy(model, prompt: np.ndarray, n: int) -> np.ndarray:
    """Step by step, no cache: a full forward pass over the last sequence_length tokens per new token."""
    ids = prompt
    for _ in range(n):
        logits = model(tf.constant(ids[:, -model.sequence_length :]))[:, -1].numpy()
        ids = np.concatenate([ids, logits.argmax(-1)[:, None]], axis=1)
    return ids[:, prompt.shape[1] :]


def test_cached_greedy_in_the_graph_matches_the_step_by_step_loop_without_cache(model):
    prompt = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    traced = tf.function(lambda p, n: generate(model, p, n, tf.constant(0.0), tf.constant(0)))
    out = traced(tf.constant(prompt), tf.constant(13)).numpy()  # 3 + 13 = the whole 16-token context
    assert out.shape == (2, 13)
    np.testing.assert_array_equal(out, reference_greedy(model, prompt, 13))


def test_a_one_token_prompt_is_a_generation_step_over_an_empty_cache(model):
    prompt = np.array([[7], [9]], np.int32)
    traced = tf.function(lambda p, n: generate(model, p, n, tf.constant(0.0), tf.constant(0)))
    out = traced(tf.constant(prompt), tf.constant(6)).numpy()
    np.testing.assert_array_equal(out, reference_greedy(model, prompt, 6))


def test_past_the_context_the_window_slides_without_cache(model):
    prompt = np.array([[1, 2, 3]], np.int32)
    out = generate(model, tf.constant(prompt), tf.constant(20), tf.constant(0.0), tf.constant(0)).numpy()
    np.testing.assert_array_equal(out, reference_greedy(model, prompt, 20))


def test_sampling_is_reproducible_by_seed_and_equal_with_or_without_cache(model):
    prompt = tf.constant([[7, 3]], tf.int32)

    def sample(seed, use_cache=True, top_k=0):
        args = (model, prompt, tf.constant(12), tf.constant(1.5), tf.constant(seed), tf.constant(top_k))
        return generate(*args, use_cache=use_cache).numpy()

    np.testing.assert_array_equal(sample(1), sample(1))
    assert not np.array_equal(sample(1), sample(2))
    np.testing.assert_array_equal(sample(3), sample(3, use_cache=False))
    np.testing.assert_array_equal(sample(3, top_k=5), sample(3, use_cache=False, top_k=5))
    # Sampling among the single most likely token is greedy decoding.
    greedy = generate(model, prompt, tf.constant(12), tf.constant(0.0), tf.constant(0)).numpy()
    np.testing.assert_array_equal(sample(4, top_k=1), greedy)


def test_top_k_only_draws_among_the_k_largest_logits():
    logits = tf.constant([[0.0, 5.0, 4.0, 3.0, 2.0, 1.0]] * 64)
    drawn = {
        int(t)
        for step in range(20)
        for t in next_token(logits, tf.constant(10.0), tf.constant(2), tf.constant(0), tf.constant(step)).numpy()
    }
    assert drawn == {1, 2}
    everything = next_token(logits, tf.constant(10.0), tf.constant(0), tf.constant(0), tf.constant(0)).numpy()
    assert len(set(everything.tolist())) > 2
