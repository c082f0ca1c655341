import re

import numpy as np
import pytest
import tensorflow as tf

from gpt.model import GPT
from gpt.pipeline.gpipe import gpipe_gradients
from gpt.pipeline.model import PipelinedGPT, stage_of

pytestmark = pytest.mark.usefixtures("two_logical_cpus")
DEVICES = ["/CPU:0", "/CPU:1"]
VOCAB, LENGTH, MICRO, M = 97, 16, 2, 3
TOKENS = M * MICRO * LENGTH


def mean_loss(logits, targets):
    return tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits)) / TOKENS


def test_loss_and_gradients_match_the_single_device_model_on_the_same_batch():
    model = PipelinedGPT.from_preset("tiny", vocab_size=VOCAB, sequence_length=LENGTH, seed=5, devices=DEVICES)
    single = GPT.from_preset("tiny", vocab_size=VOCAB, sequence_length=LENGTH, seed=5)
    single.set_weights(model.get_weights())
    tokens = tf.constant(np.random.default_rng(1).integers(0, VOCAB, [M, MICRO, LENGTH + 1]), tf.int32)

    loss, grads = tf.function(lambda t: gpipe_gradients(model, t, mean_loss, loss_scale=8.0))(tokens)

    @tf.function
    def reference(t):
        flat = tf.reshape(t, [M * MICRO, LENGTH + 1])  # the M micro-batches as one batch
        with tf.GradientTape() as tape:
            loss = mean_loss(single(flat[:, :-1], training=True), flat[:, 1:])
            scaled = loss * 8.0
        return loss, [tf.convert_to_tensor(g) for g in tape.gradient(scaled, single.trainable_variables)]

    expected_loss, expected_grads = reference(tokens)
    # float32; the pipeline sums M micro-batch terms where the reference reduces one batch: the order of the
    # additions differs: equal to float32 rounding (seen: the loss exactly, gradients within 6e-7 of values up to 2).
    assert float(loss) == pytest.approx(float(expected_loss), rel=1e-6)
    assert len(grads) == len(expected_grads) == len(model.trainable_variables)
    for variable, grad, expected in zip(model.trainable_variables, grads, expected_grads, strict=True):
        np.testing.assert_allclose(grad.numpy(), expected.numpy(), rtol=1e-4, atol=2e-6, err_msg=variable.path)
    assert np.abs(expected_grads[0].numpy()).max() > 1e-3  # the token embedding's (tied) gradient is not trivial


def test_gradients_are_computed_on_their_stages_devices():
    model = PipelinedGPT.from_preset("tiny", vocab_size=VOCAB, sequence_length=LENGTH, devices=DEVICES)
    tokens = tf.zeros([M, MICRO, LENGTH + 1], tf.int32)
    graph = tf.function(lambda t: gpipe_gradients(model, t, mean_loss)).get_concrete_function(tokens).graph
    # Backward ops are named after the tape; each stage's sit on its device (none are left to the placer).
    backward = [op for op in graph.get_operations() if op.name.startswith("gradient_tape/")]
    by_block = {
        k: {op.device for op in backward if re.match(rf"gradient_tape/h{k}(_\d+)?/", op.name)} for k in range(2)
    }
    assert by_block[0] and all(d.endswith("CPU:0") for d in by_block[0]), by_block
    assert by_block[1] and all(d.endswith("CPU:1") for d in by_block[1]), by_block
    assert [stage_of(v, DEVICES) for v in model.trainable_variables][-1] == 1  # ln_f's beta
