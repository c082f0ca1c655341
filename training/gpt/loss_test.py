import numpy as np
import tensorflow as tf

from gpt.loss import sparse_cross_entropy


def test_values_and_gradient_equal_tensorflows_fused_cross_entropy():
    logits = tf.random.stateless_normal([12, 50], seed=[1, 2]) * 3
    targets = tf.random.stateless_uniform([12], seed=[3, 4], maxval=50, dtype=tf.int32)
    weights = tf.range(12, dtype=tf.float32)  # a different upstream gradient per token
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(logits)
        ours = sparse_cross_entropy(targets, logits)
        reference = tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits)
        ours_sum, reference_sum = tf.reduce_sum(ours * weights), tf.reduce_sum(reference * weights)
    np.testing.assert_allclose(ours.numpy(), reference.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        tape.gradient(ours_sum, logits).numpy(), tape.gradient(reference_sum, logits).numpy(), atol=1e-6
    )


def test_a_far_off_target_does_not_underflow():
    """p[target] = e^-500 is no float32: that batch's loss comes from the log-sum-exp, every row exact."""
    logits = tf.constant([[0.0, 200.0, -300.0], [1.0, 2.0, 3.0]])
    expected = [500.0, np.log(np.exp([1.0, 2.0, 3.0]).sum()) - 1.0]
    np.testing.assert_allclose(sparse_cross_entropy(tf.constant([2, 0]), logits).numpy(), expected, rtol=1e-6)


def test_the_gradient_waits_for_the_loss_so_the_logits_die_with_it():
    """Nothing in a backward pass needs the loss's value; without an edge from it the executor may run the loss's
    cond after every block's backward pass, the logits and the softmax alive all along (docs/benchmarks.md)."""

    @tf.function
    def gradient(logits, targets):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = tf.reduce_sum(sparse_cross_entropy(targets, logits))
        return tape.gradient(loss, logits)

    graph = gradient.get_concrete_function(tf.TensorSpec([4, 8]), tf.TensorSpec([4], tf.int32)).graph
    ops = graph.get_operations()
    conds = {op for op in ops if op.type in ("If", "StatelessIf")}
    calls = [op for op in ops if "PartitionedCall" in op.type and "_gradient" in op.get_attr("f").name]
    assert conds and calls

    def after_a_cond(op) -> bool:  # the cond itself or the identity of its output that tf.cond returns
        return op in conds or any(t.op in conds for t in op.inputs)

    assert all(any(after_a_cond(op) for op in call.control_inputs) for call in calls)
