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


def graph_ops(graph) -> list:
    """(name, type, device) of every node of a tf.function's graph and of the functions it calls (loop bodies)."""
    graph_def = graph.as_graph_def()
    nodes = [*graph_def.node, *(node for f in graph_def.library.function for node in f.node_def)]
    return [(node.name, node.op, node.device) for node in nodes]


def test_gradients_are_computed_on_their_stages_devices():
    model = PipelinedGPT.from_preset("tiny", vocab_size=VOCAB, sequence_length=LENGTH, devices=DEVICES)
    tokens = tf.zeros([M, MICRO, LENGTH + 1], tf.int32)
    graph = tf.function(lambda t: gpipe_gradients(model, t, mean_loss)).get_concrete_function(tokens).graph
    # Backward ops are named after the tape; each stage's sit on its device (none are left to the placer).
    backward = [(name, device) for name, _, device in graph_ops(graph) if name.startswith("gradient_tape/")]
    by_block = {k: {d for name, d in backward if re.search(rf"/h{k}(_\d+)?/", name)} for k in range(2)}
    assert by_block[0] and all(d.endswith("CPU:0") for d in by_block[0]), by_block
    assert by_block[1] and all(d.endswith("CPU:1") for d in by_block[1]), by_block
    assert [stage_of(v, DEVICES) for v in model.trainable_variables][-1] == 1  # ln_f's beta


def test_the_graph_does_not_grow_with_the_micro_batches():
    model = PipelinedGPT.from_preset("tiny", vocab_size=VOCAB, sequence_length=LENGTH, devices=DEVICES)
    step = tf.function(lambda t: gpipe_gradients(model, t, mean_loss))
    counts = {m: len(graph_ops(step.get_concrete_function(tf.zeros([m, MICRO, LENGTH + 1], tf.int32)).graph))
              for m in (1, 2, 8)}  # fmt: skip
    assert counts[1] == counts[2] == counts[8], counts  # unrolled in Python, it grew by about 690 ops per micro-batch


def reference_gradients(single: GPT, tokens: tf.Tensor, scale: float):
    """The single-device model run on the micro-batches one after another (its dropout seeds advance alike)."""
    loss, grads = 0.0, None
    for m in range(tokens.shape[0]):
        with tf.GradientTape() as tape:
            micro_loss = mean_loss(single(tokens[m, :, :-1], training=True), tokens[m, :, 1:])
            scaled = micro_loss * scale
        terms = [tf.convert_to_tensor(g) for g in tape.gradient(scaled, single.trainable_variables)]
        loss, grads = loss + micro_loss, terms if grads is None else [a + b for a, b in zip(grads, terms, strict=True)]
    return loss, grads


@pytest.mark.parametrize(
    ("stages", "count", "dropout"),
    [(3, 2, 0.0), (3, 5, 0.0), (1, 2, 0.0), (2, 3, 0.1)],  # fewer micro-batches than stages; no pipeline; dropout
)
def test_every_schedule_gives_the_micro_batches_gradients(stages, count, dropout):
    devices = (DEVICES * 2)[:stages]  # stages may share a device: the schedule is the same
    kwargs = {"vocab_size": VOCAB, "sequence_length": LENGTH, "n_layer": 3, "d_model": 32, "n_head": 2, "seed": 7}
    model = PipelinedGPT(**kwargs, dropout=dropout, devices=devices)
    single = GPT(**kwargs, dropout=dropout)
    single.set_weights(model.get_weights())
    tokens = tf.constant(np.random.default_rng(2).integers(0, VOCAB, [count, MICRO, LENGTH + 1]), tf.int32)
    step = tf.function(lambda t: gpipe_gradients(model, t, mean_loss, loss_scale=4.0))
    loss, grads = step(tokens)
    expected_loss, expected = tf.function(lambda t: reference_gradients(single, t, 4.0))(tokens)
    assert float(loss) == pytest.approx(float(expected_loss), rel=1e-6)
    for variable, grad, want in zip(model.trainable_variables, grads, expected, strict=True):
        np.testing.assert_allclose(grad.numpy(), want.numpy(), rtol=1e-4, atol=2e-6, err_msg=variable.path)
    # The seed states end where the forward pass left them: one draw per micro-batch, as the single model's.
    states = [v.numpy().tolist() for v in model.variables if "seed" in v.path]
    assert states == [v.numpy().tolist() for v in single.variables if "seed" in v.path]
