"""GPipe: the micro-batches of a step flow through the stages so that the stages work on different ones at once.

K = 3 stages, M = 4 micro-batches; F3 = forward of micro-batch 3, B3 = its backward (unit times, time goes right):

    device 0   F0 F1 F2 F3 .  .  .  .  B3 B2 B1 B0
    device 1   .  F0 F1 F2 F3 .  .  B3 B2 B1 B0 .
    device 2   .  .  F0 F1 F2 F3 B3 B2 B1 B0 .  .

Each device is busy 2M of 2(M + K - 1) slots: the bubble is (K - 1) / (M + K - 1) = 2 / 6 here, and shrinks as
M grows (Huang et al. 2019, "GPipe"). Every device keeps the activations of all M micro-batches until their
backward pass (``recompute`` keeps only each block's input).

The schedule is one TensorFlow graph: each cell (a stage's forward or backward of one micro-batch) runs under
``tf.device`` of its stage, its data comes from the neighbouring stage's cell (TensorFlow copies it between
devices), and a control dependency makes each device run its cells in the order above. TensorFlow's executor
starts every cell whose inputs are ready, so the devices work concurrently. The backward pass of a cell is
``GradientTape.gradient`` of that cell's tape, with the next stage's input gradient as ``output_gradients``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import tensorflow as tf

from gpt.pipeline.model import PipelinedGPT, variable_device


def _after(cell):
    """Runs the ops created inside after ``cell`` (the previous cell on the same device), if there is one."""
    return tf.control_dependencies([cell]) if cell is not None else contextlib.nullcontext()


def gpipe_gradients(
    model: PipelinedGPT,
    tokens: tf.Tensor,
    loss_fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
    loss_scale: tf.Tensor | float = 1.0,
) -> tuple[tf.Tensor, list[tf.Tensor]]:
    """The summed loss of M micro-batches and the gradients of ``loss_scale`` x that sum, through a GPipe schedule.

    Args:
        model: the pipelined GPT.
        tokens: [M, micro_batch, T + 1] int32: M micro-batches of sequences (inputs and shifted targets).
        loss_fn: ``loss_fn(logits, targets)`` -> one micro-batch's scalar loss, on the last stage.
        loss_scale: fp16 loss scaling; the gradients are of the scaled loss.

    Returns:
        (sum of the M losses, on the last device; the gradient of every ``model.trainable_variables`` entry,
        dense, on its variable's device, summed over the micro-batches).

    Example:
        >>> loss, grads = gpipe_gradients(model, tokens, lambda logits, targets: tf.reduce_mean(
        ...     tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits)))
    """
    stages, last = model.num_stages, model.num_stages - 1
    busy = [None] * stages  # the last cell scheduled on each device
    tapes, stage_in, stage_out, losses = {}, {}, {}, []

    for m in range(tokens.shape[0]):  # forward: F0 .. F(M-1) on every device
        x = None
        for k in range(stages):
            with tf.device(model.devices[k]), _after(busy[k]), tf.GradientTape() as tape:
                if k == 0:
                    x = tokens[m, :, :-1]
                else:
                    tape.watch(x)
                y = model.stage_call(k, x, training=True)
                if k == last:
                    loss = loss_fn(y, tokens[m, :, 1:])
                    losses.append(loss)
                    y = loss * loss_scale
            tapes[m, k], stage_in[m, k], stage_out[m, k] = tape, x, y
            busy[k], x = y, y

    grads: dict[int, tf.Tensor] = {}
    for m in reversed(range(tokens.shape[0])):  # backward: B(M-1) .. B0 on every device
        upstream = None  # d(scaled loss) / d(the next stage's input)
        for k in reversed(range(stages)):
            sources = model.stage_inputs(k)
            with tf.device(model.devices[k]), _after(busy[k]):
                result = tapes[m, k].gradient(
                    stage_out[m, k], [*sources, stage_in[m, k]] if k > 0 else sources, output_gradients=upstream
                )
                upstream = result.pop() if k > 0 else None
                busy[k] = tf.group(*result, *([upstream] if k > 0 else []))
            for variable, grad in zip(sources, result, strict=True):
                _accumulate(grads, variable, grad)

    with tf.device(model.devices[last]):
        total = tf.add_n(losses)
    return total, [grads[id(v)] for v in model.trainable_variables]


def _accumulate(grads: dict[int, tf.Tensor], variable, grad) -> None:
    """grads[variable] += grad, on the variable's device (the tied embedding gets terms from two stages)."""
    with tf.device(variable_device(variable)):
        grad = tf.convert_to_tensor(grad)  # embedding lookups give IndexedSlices
        key = id(variable)
        grads[key] = grads[key] + grad if key in grads else grad
