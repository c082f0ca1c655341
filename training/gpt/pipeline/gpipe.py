"""GPipe: the micro-batches of a step flow through the stages so that the stages work on different ones at once.

K = 3 stages, M = 4 micro-batches; F3 = forward of micro-batch 3, B3 = its backward (time goes right, one column
a clock tick t of the loops below):

    device 0   F0 F1 F2 F3 .  B3 B2 B1 B0 .  .
    device 1   .  F0 F1 F2 F3 .  B3 B2 B1 B0 .
    device 2   .  .  .  .  .  B3 B2 B1 B0 .  .       (the last stage's forward runs inside its backward cell)

The bubble is (K - 1) / (M + K - 1) of each device's time and shrinks as M grows (Huang et al. 2019, "GPipe").
As in GPipe's re-materialisation, each stage keeps only its input for each micro-batch (M tensors of
[micro_batch, T, d]) and its backward cell runs the stage's forward again under a tape: one more forward per
stage and micro-batch (about a third more compute), activations of one micro-batch at a time.

The schedule is two ``tf.while_loop``s over clock ticks, so the graph holds each stage's cell once whatever M is:

    forward  t = 0 .. M + K - 3:  stage k < K - 1 runs F(t - k) on the input stage k - 1 gave it at tick t - 1
    backward t = 0 .. M + K - 2:  stage k runs B(M - 1 - t + K - 1 - k) with the input gradient stage k + 1 gave
                                  it at tick t - 1, and adds its weights' gradients to its own accumulators

The cells of one tick depend on nothing else of that tick, so TensorFlow's executor runs them at once, each
under ``tf.device`` of its stage (data between stages is copied by TensorFlow). A ``tf.cond`` skips the cells of
the fill and drain ticks. Every stage's gradient accumulators (float32, its variables' shapes; on the last stage
one more for the tied token embedding, added to the first stage's once per pass) live on its device.
With dropout, each cell's seed states are kept with its input and set again before the recomputation, so the
recomputed forward drops the same units.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from gpt.pipeline.model import PipelinedGPT, variable_device


def gpipe_gradients(
    model: PipelinedGPT,
    tokens: tf.Tensor,
    loss_fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
    loss_scale: tf.Tensor | float = 1.0,
    stream: tf.Tensor | None = None,
) -> tuple[tf.Tensor, list[tf.Tensor]]:
    """The summed loss of M micro-batches and the gradients of ``loss_scale`` x that sum, through a GPipe schedule.

    Args:
        model: the pipelined GPT.
        tokens: [M, micro_batch, T + 1] int32: M micro-batches of sequences (inputs and shifted targets).
        loss_fn: ``loss_fn(logits, targets)`` -> one micro-batch's scalar loss, on the last stage.
        loss_scale: fp16 loss scaling; the gradients are of the scaled loss.
        stream: the data-parallel replica drawing the dropout masks (``gpt.layers.next_seed``).

    Returns:
        (sum of the M losses, on the last device; the gradient of every ``model.trainable_variables`` entry,
        dense, on its variable's device, summed over the micro-batches).

    Example:
        >>> model = PipelinedGPT.from_preset("tiny", vocab_size=512, sequence_length=32, devices=["/CPU:0", "/CPU:1"])
        >>> tokens = tf.zeros([4, 2, 33], tf.int32)  # 4 micro-batches of 2 sequences
        >>> def mean_loss(logits, targets):
        ...     return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits))
        >>> loss, grads = tf.function(lambda t: gpipe_gradients(model, t, mean_loss))(tokens)  # in a graph
        >>> loss.shape, len(grads) == len(model.trainable_variables)
        (TensorShape([]), True)
    """
    count, micro, length = tokens.shape[0], tokens.shape[1], tokens.shape[2] - 1
    stages, last = model.num_stages, model.num_stages - 1
    devices = model.devices
    hidden = ([micro, length, model.d_model], model.compute_dtype)
    seeds = [_seed_states(model, k) for k in range(stages)]

    def micro_batch(t: tf.Tensor, k: int, backward: bool) -> tuple[tf.Tensor, tf.Tensor]:
        """Stage k's micro-batch at tick t (clamped into range) and whether the cell runs at all."""
        m = count - 1 - t + (last - k) if backward else t - k
        return tf.clip_by_value(m, 0, count - 1), (m >= 0) & (m < count)

    def slot(m: tf.Tensor, valid: tf.Tensor) -> tf.Tensor:
        return tf.where(valid, m, count)  # the idle cells write to a spare slot at the end

    # Kept for the backward cells, per micro-batch: stage k > 0's input (stage k - 1's output), seed states.
    saved, seed_log = {}, {}
    for k in range(stages):
        with tf.device(devices[k]):
            if k:
                saved[k] = tf.TensorArray(hidden[1], count + 1, element_shape=hidden[0])
            if seeds[k]:
                seed_log[k] = tf.TensorArray(tf.int64, count + 1, element_shape=[len(seeds[k]), 2])

    ahead = max(last - 1, 0)  # the last stage runs no forward cell: its seeds are drawn beside stage K - 2's cell

    def forward_tick(t, inputs, saved, seed_log):
        outputs, saved, seed_log = [], dict(saved), dict(seed_log)
        for k in range(last):
            m, valid = micro_batch(t, k, backward=False)
            with tf.device(devices[k]):
                x = tokens[m, :, :-1] if k == 0 else inputs[k - 1]
                if seeds[k]:
                    seed_log[k] = seed_log[k].write(slot(m, valid), _read(seeds[k]))
                y = tf.cond(valid, lambda k=k, x=x: _stage(model, k, x, hidden[0], stream), lambda: tf.zeros(*hidden))
            with tf.device(devices[k + 1]):
                saved[k + 1] = saved[k + 1].write(slot(m, valid), y)
            outputs.append(y)
        if seeds[last]:  # the draws the last stage's forward makes, for micro-batch t - ahead
            m, valid = micro_batch(t - ahead + last, last, backward=False)
            with tf.device(devices[last]):
                seed_log[last] = seed_log[last].write(slot(m, valid), _read(seeds[last]))
                tf.cond(valid, lambda: _draw(seeds[last]), lambda: None)
        return t + 1, outputs[:-1], saved, seed_log

    first_inputs = []
    for k in range(1, last):
        with tf.device(devices[k]):
            first_inputs.append(tf.zeros(*hidden))
    if last or seeds[last]:
        _, _, saved, seed_log = tf.while_loop(
            lambda t, *_: t < count + ahead,
            forward_tick,
            [tf.constant(0), first_inputs, saved, seed_log],
            parallel_iterations=1,  # one tick at a time: the first stage may not run micro-batches ahead
        )
    after_forward = [_read(s) if s else None for s in seeds]

    sources = [model.stage_inputs(k) for k in range(stages)]

    def backward_cell(k, x, m, upstream, accumulators, loss):
        """Stage k's forward again and its backward for micro-batch m: accumulators + its gradients."""
        with tf.GradientTape() as tape:
            if k:
                tape.watch(x)
            y = _stage(model, k, x, hidden[0], stream)
            if k == last:
                micro_loss = loss_fn(y, tokens[m, :, 1:])
                y = micro_loss * loss_scale
        result = tape.gradient(y, [*sources[k], x] if k else sources[k], output_gradients=upstream)
        grads = [tf.convert_to_tensor(g) for g in result[: len(sources[k])]]  # embedding lookups: IndexedSlices
        summed = [a + g for a, g in zip(accumulators, grads, strict=True)]
        if k == last:
            loss = loss + micro_loss
        return summed, (tf.ensure_shape(result[-1], hidden[0]) if k else tf.zeros([])), loss

    def backward_tick(t, upstreams, accumulators, loss):
        given, upstreams, accumulators = upstreams, list(upstreams), list(accumulators)
        for k in reversed(range(stages)):
            m, valid = micro_batch(t, k, backward=True)
            with tf.device(devices[k]):
                x = tokens[m, :, :-1] if k == 0 else saved[k].read(m)
                if seeds[k]:
                    _assign(seeds[k], seed_log[k].read(m))
                upstream = given[k] if k < last else None  # stage k + 1's, from tick t - 1
                stage_loss = loss if k == last else tf.zeros([])
                summed, input_grad, stage_loss = tf.cond(
                    valid,
                    lambda k=k, x=x, m=m, u=upstream, a=accumulators[k], s=stage_loss: backward_cell(k, x, m, u, a, s),
                    lambda k=k, a=accumulators[k], s=stage_loss: (
                        a, tf.zeros(*hidden) if k else tf.zeros([]), s
                    ),
                )  # fmt: skip
                accumulators[k] = summed
                if k:
                    upstreams[k - 1] = input_grad
                if k == last:
                    loss = stage_loss
        return t + 1, upstreams, accumulators, loss

    upstreams, accumulators = [], []
    for k in range(stages):
        with tf.device(devices[k]):
            upstreams.append(tf.zeros(*hidden))
            accumulators.append([tf.zeros(v.shape, tf.float32) for v in sources[k]])
    with tf.device(devices[last]):
        loss = tf.zeros([])
    _, _, accumulators, loss = tf.while_loop(
        lambda t, *_: t < count + last,
        backward_tick,
        [tf.constant(0), upstreams, accumulators, loss],
        parallel_iterations=1,
    )
    for k in range(stages):
        if seeds[k]:
            with tf.device(devices[k]):
                _assign(seeds[k], after_forward[k])  # where the forward loop left them

    grads: dict[int, tf.Tensor] = {}
    for k in range(stages):
        for variable, grad in zip(sources[k], accumulators[k], strict=True):
            with tf.device(variable_device(variable)):  # the tied embedding: the last stage's term, once
                grads[id(variable)] = grads[id(variable)] + grad if id(variable) in grads else grad
    return loss, [grads[id(v)] for v in model.trainable_variables]


def _stage(model: PipelinedGPT, stage: int, x: tf.Tensor, shape: list[int], stream: tf.Tensor | None) -> tf.Tensor:
    """Stage ``stage`` in training; a hidden output gets its static shape (a loop variable's may not change)."""
    y = model.stage_call(stage, x, training=True, stream=stream)
    return y if stage == model.num_stages - 1 else tf.ensure_shape(y, shape)


def _seed_states(model: PipelinedGPT, stage: int) -> list:
    """The dropout SeedGenerators stage ``stage`` draws from in training, one draw each (none without dropout)."""
    if model.dropout <= 0:
        return []
    generators = [model.blocks[i].seed_generator for i in model.stage_blocks[stage]]
    return ([model.seed_generator] if stage == 0 else []) + generators


def _draw(generators: list) -> None:
    for generator in generators:
        generator.next()


def _read(generators: list) -> tf.Tensor:
    return tf.stack([tf.cast(g.state.value, tf.int64) for g in generators])


def _assign(generators: list, values: tf.Tensor) -> None:
    for i, generator in enumerate(generators):
        generator.state.assign(tf.cast(values[i], generator.state.dtype))
