import numpy as np
import tensorflow as tf

from gpt.generate import generate
from gpt.model import GPT


def test_greedy_generation_matches_a_step_by_step_argmax_past_the_context_window():
    model = GPT.from_preset("tiny", vocab_size=50, sequence_length=8, seed=1)
    prompt = tf.constant([[1, 2, 3], [4, 5, 6]], tf.int32)
    out = generate(model, prompt, tf.constant(10), tf.constant(0.0), tf.constant(0)).numpy()
    assert out.shape == (2, 10)
    ids = prompt.numpy()
    for _ in range(10):  # 3 + 10 tokens > the 8-token window: the loop must crop to the last 8
        logits = model(tf.constant(ids[:, -8:]))[:, -1].numpy()
        ids = np.concatenate([ids, logits.argmax(-1)[:, None]], axis=1)
    np.testing.assert_array_equal(out, ids[:, 3:])


def test_sampling_is_reproducible_by_seed():
    model = GPT.from_preset("tiny", vocab_size=50, sequence_length=8, seed=1)
    prompt = tf.constant([[7]], tf.int32)

    def sample(seed):
        return generate(model, prompt, tf.constant(12), tf.constant(1.5), tf.constant(seed)).numpy()

    np.testing.assert_array_equal(sample(1), sample(1))
    assert not np.array_equal(sample(1), sample(2))
