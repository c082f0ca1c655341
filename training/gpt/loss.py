"""Token cross-entropy through a softmax, with its gradient written out.

    p      = softmax(logits)                                  one pass (oneDNN on CPU, cuDNN on GPU)
    loss_i = -log p_i[t_i]                                    while every p_i[t_i] is a normal float32
           = (max_i logits_i - log max_i p_i) - logits_i[t_i] otherwise (the log-sum-exp, for the whole batch)
    dloss / dlogits = upstream_i · (p_i - onehot(t_i))         one XLA-fused pass over p

The same values and gradient as ``tf.nn.sparse_softmax_cross_entropy_with_logits`` (to float32 rounding), at
a fraction of its cost on a CPU (training/README.md, "Measurements"). -log p[t] is as exact as p while
p[t] is a normal float, i.e. up to a loss of 87 nats per token; a batch where some token's is smaller takes the
log-sum-exp from the softmax's largest probability, which is at least 1 / vocab and never underflows, at the
cost of two row maxima. The choice is a ``tf.cond`` on one boolean; the gradient does not depend on it.
The gradient is one fused pass (XLA; a GPU runs it as one kernel), where keeping p - onehot(t) from the forward
pass and multiplying by ``upstream`` in the backward one were two passes over [N, vocab].
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

_SMALLEST_NORMAL = float(np.finfo(np.float32).tiny)  # 2^-126; below it a float32 loses precision, then flushes to 0


@tf.function(jit_compile=True)
def _gradient(p: tf.Tensor, targets: tf.Tensor, upstream: tf.Tensor) -> tf.Tensor:
    """upstream [N] · (p [N, vocab] - onehot(targets [N])), fused into one pass by XLA."""
    onehot = tf.range(tf.shape(p)[1])[tf.newaxis] == targets[:, tf.newaxis]
    return upstream[:, tf.newaxis] * (p - tf.cast(onehot, p.dtype))


@tf.custom_gradient
def sparse_cross_entropy(targets: tf.Tensor, logits: tf.Tensor):
    """Per-token -log softmax(logits)[target]: targets [N] int32, logits [N, vocab] float32 -> [N] float32.

    Example:
        >>> logits = tf.random.normal([6, 10])
        >>> targets = tf.constant([1, 2, 3, 4, 5, 6])
        >>> reference = tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits)
        >>> float(tf.reduce_max(abs(sparse_cross_entropy(targets, logits) - reference))) < 1e-5
        True
    """
    p = tf.nn.softmax(logits)
    p_target = tf.gather(p, targets, batch_dims=1)

    def through_maxima() -> tf.Tensor:  # log-sum-exp - logits[target], for every row
        log_sum_exp = tf.reduce_max(logits, -1) - tf.math.log(tf.reduce_max(p, -1))
        return log_sum_exp - tf.gather(logits, targets, batch_dims=1)

    # -log p[target] is the loss itself, as exact as p, while p[target] is a normal float (loss < 87 nats); only
    # a batch with a smaller one pays the two row maxima.
    normal = tf.reduce_all(p_target >= _SMALLEST_NORMAL)
    loss = tf.cond(normal, lambda: -tf.math.log(p_target), through_maxima)

    def grad(upstream):
        # After the loss: nothing in the backward pass needs its value, so without this edge TensorFlow's executor
        # may run the cond last, keeping the logits and p ([N, vocab] float32 each) alive through every block's
        # backward pass (docs/benchmarks.md, "The recomputed case").
        with tf.control_dependencies([loss]):
            return None, _gradient(p, targets, upstream)

    return loss, grad
