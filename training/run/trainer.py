"""The training step: gradient accumulation, one all-reduce, loss scaling, clipping, AdamW.

    for each of `accumulation` micro-batches (on every replica):
        loss_i = sum of token cross-entropies / tokens in the global batch    (a share of the global mean)
        grads += d(loss_i x loss_scale) / d(weights)
    grads = all-reduce SUM over replicas / loss_scale       -> gradient of the global mean loss
    norm  = global norm; clip to grad_clip
    if the loss and the norm are finite: AdamW; else the step is skipped (counted)

The whole step is one tf.function that the host only launches: the finiteness check is a ``tf.cond`` on the
device, so a NaN never reaches the weights and the GPU never waits for the host between steps. Its figures
(``StepResult``) stay on the device until something asks for them (the loop does once a logging window).
float16 runs halve the loss scale on a skipped step (dynamic loss scaling). Keras ``fit`` is not used: it fails
under MultiWorkerMirroredStrategy in Keras 3.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from observe.metrics import Evaluation

from run.engines import DataParallelEngine

PRECISIONS = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


class AdamW(keras.optimizers.AdamW):
    """Keras AdamW for gradients that arrive already summed over replicas, each variable's update one kernel,
    the step's scalars computed once.

    Keras all-reduces in ``apply`` when called on a replica, after clipping each replica's share; the
    trainer all-reduces first and clips the global gradient, so this optimizer skips the second sum.

    The update is Keras Adam's formula, run by TensorFlow's ``ResourceApplyAdam`` kernel (CPU and GPU):

        m ← m + (g - m)(1 - β1);  v ← v + (g² - v)(1 - β2);  w ← w - lr √(1 - β2ᵗ) / (1 - β1ᵗ) · m / (√v + ε)

    one pass over (g, m, v, w) instead of Keras' nine element-wise operations, each a pass (on a GPU, one kernel
    launch per variable instead of nine; timings: training/README.md, "Measurements"). Weight decay is Keras' decoupled
    ``w ← w - lr λ w``, taken before the update as one product, ``w ← w (1 - lr λ)``, where Keras makes two
    products and a subtraction (three passes over w). The learning rate (a schedule), β1ᵗ, β2ᵗ and 1 - lr λ are
    computed once a step; Keras computes them for each variable (two powers and five casts each, and the whole
    schedule again for each decayed one), a handful of scalar operations per variable that a GPU launches as
    kernels of their own.
    """

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)

    def _apply_weight_decay(self, variables):
        decayed = [v for v in variables if self._use_weight_decay(v)] if self.weight_decay else []
        if not decayed:
            return
        keep = 1 - tf.cast(self.learning_rate, tf.float32) * self.weight_decay

        def decay_all(distribution, variables):
            for variable in variables:
                distribution.extended.update(_tf_variable(variable), self._decay, args=(keep,), group=False)

        tf.__internal__.distribute.interim.maybe_merge_call(decay_all, self._distribution_strategy, decayed)

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
        if self.amsgrad:
            raise ValueError("AdamW here has no amsgrad")
        step = tf.cast(self.iterations + 1, tf.float32)
        scalars = {
            "beta1_power": tf.pow(tf.constant(self.beta_1, tf.float32), step),
            "beta2_power": tf.pow(tf.constant(self.beta_2, tf.float32), step),
            "lr": tf.cast(learning_rate, tf.float32),
        }
        for gradient, variable in grads_and_vars:
            distribution.extended.update(variable, self._update, args=(gradient, scalars), group=False)

    def _decay(self, variable, keep: tf.Tensor) -> None:
        """w ← w (1 - lr λ) for one variable (on its device)."""
        variable.assign(variable * tf.cast(keep, variable.dtype))

    def _update(self, variable, gradient, scalars: dict[str, tf.Tensor]) -> None:
        """One variable's Adam update (on its device), from the step's scalars."""
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable),
            m=_handle(self._momentums[index]),
            v=_handle(self._velocities[index]),
            **{name: tf.cast(value, dtype) for name, value in scalars.items()},
            beta1=tf.constant(self.beta_1, dtype),
            beta2=tf.constant(self.beta_2, dtype),
            epsilon=tf.constant(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype),
        )


def _tf_variable(variable):
    """The TensorFlow variable behind a Keras one (the one a distribution strategy updates)."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def _handle(variable) -> tf.Tensor:
    """The resource handle of a Keras or TensorFlow variable (inside a distribution update, this device's copy)."""
    return _tf_variable(variable).handle


def make_optimizer(
    model: keras.Model,
    learning_rate,
    *,
    weight_decay: float = 0.1,
    beta_1: float = 0.9,
    beta_2: float = 0.95,
    epsilon: float = 1e-8,
    optimizer_class: type[AdamW] = AdamW,
) -> AdamW:
    """AdamW (GPT-3 betas) with weight decay on matrices only: no decay on biases, norms' gains and biases."""
    optimizer = optimizer_class(
        learning_rate=learning_rate, weight_decay=weight_decay, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon
    )
    optimizer.exclude_from_weight_decay(var_list=[v for v in model.trainable_variables if len(v.shape) < 2])
    optimizer.build(model.trainable_variables)
    return optimizer


class StepResult:
    """A training step's figures, on the device until first asked for; then one host read for all of them.

    Args:
        figures: [loss, gradient norm, 1 if applied else 0, steps skipped so far by this trainer, the learning rate
            of the next step] float32.
    """

    def __init__(self, figures: tf.Tensor):
        self._figures, self._host = figures, None

    def _read(self) -> np.ndarray:
        if self._host is None:
            self._host = self._figures.numpy()  # waits for the step
        return self._host

    def wait(self) -> StepResult:
        """Waits for the step to finish on the device (reads its figures); returns the result."""
        self._read()
        return self

    @property
    def loss(self) -> float:
        return float(self._read()[0])

    @property
    def grad_norm(self) -> float:
        return float(self._read()[1])

    @property
    def applied(self) -> bool:
        return bool(self._read()[2])

    @property
    def skipped_steps(self) -> int:
        """Steps skipped for a non-finite loss or gradient norm since the trainer was made."""
        return int(self._read()[3])

    @property
    def learning_rate(self) -> float:
        """The schedule's rate at the optimizer's step count after this step."""
        return float(self._read()[4])

    def __repr__(self) -> str:
        return f"StepResult(loss={self.loss:.4g}, grad_norm={self.grad_norm:.4g}, applied={self.applied})"


class Trainer:
    """Runs training and evaluation steps of a model on a data-parallel engine (``engines.py``).

    Args:
        model: the GPT, created in ``engine.scope()``.
        optimizer: from ``make_optimizer``, created in ``engine.scope()``.
        engine: a ``DataParallelEngine`` (a StrategyEngine or HorovodEngine).
        accumulation_steps: micro-batches per optimizer step on each replica.
        micro_batch_size: sequences per micro-batch per replica.
        sequence_length: tokens per sequence (the model's context).
        precision: "fp32", "bf16" or "fp16" (fp16 uses dynamic loss scaling).
        grad_clip: clip the global gradient norm to this; 0 disables clipping.
        use_xla: compile each micro-batch's forward and backward pass with XLA.
        initial_loss_scale: fp16 only.

    Example:
        >>> from gpt.model import GPT
        >>> from run.engines import StrategyEngine
        >>> engine = StrategyEngine(tf.distribute.get_strategy(), "default")
        >>> model = GPT.from_preset("tiny", vocab_size=64, sequence_length=8)
        >>> trainer = Trainer(model, make_optimizer(model, 1e-3), engine, accumulation_steps=2, micro_batch_size=2,
        ...                   sequence_length=8)
        >>> trainer.batch_shape  # [local_replicas, accumulation_steps, micro_batch_size, T + 1]
        (1, 2, 2, 9)
        >>> result = trainer.train_step(tf.zeros(trainer.batch_shape, tf.int32))  # launched; nothing read back
        >>> result.applied, result.skipped_steps  # the first figure asked for waits for the step and reads all
        (True, 0)
    """

    loss_scale_period = 2000  # fp16: double the scale after this many finite steps

    def __init__(
        self,
        model: keras.Model,
        optimizer: AdamW,
        engine: DataParallelEngine,
        *,
        accumulation_steps: int,
        micro_batch_size: int,
        sequence_length: int,
        precision: str = "fp32",
        grad_clip: float = 1.0,
        use_xla: bool = False,
        initial_loss_scale: float = 2.0**15,
        token_bytes: np.ndarray | None = None,
    ):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {list(PRECISIONS)}, not {precision!r}")
        self.model, self.optimizer, self.engine = model, optimizer, engine
        self.accumulation_steps, self.precision, self.grad_clip = accumulation_steps, precision, grad_clip
        # The UTF-8 bytes of each token id (pile.bpe.token_byte_lengths), for bits per byte; None: not reported.
        self.token_bytes = None if token_bytes is None else tf.constant(token_bytes, tf.float32)
        self.batch_shape = (engine.local_replicas, accumulation_steps, micro_batch_size, sequence_length + 1)
        # Tokens that one optimizer step learns from, over all replicas: the loss is their mean.
        self.tokens_per_step = engine.num_replicas * accumulation_steps * micro_batch_size * sequence_length
        with engine.scope():
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
            scale = initial_loss_scale if precision == "fp16" else 1.0
            self.loss_scale = tf.Variable(scale, dtype=tf.float32, trainable=False, name="loss_scale")
            self.good_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="finite_steps_since_scale_change")
            self.skipped = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped_steps")
        self._micro_grads = tf.function(self._micro_grads_fn, jit_compile=use_xla)
        self._step = tf.function(self._step_fn)
        self._evaluate = tf.function(self._evaluate_fn)

    # --- one replica ------------------------------------------------------------------------------

    def _micro_grads_fn(self, tokens: tf.Tensor, stream: tf.Tensor | None = None):
        """A micro-batch's loss share and gradients on one replica; ``stream``: the replica drawing the dropout masks
        (``engine.replica_index()``; None: one stream)."""
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        with tf.GradientTape() as tape:
            loss = self.model.loss_sum(inputs, targets, training=True, stream=stream) / self.tokens_per_step
            scaled = loss * self.loss_scale
        grads = self.engine.gradient(tape, scaled, self.model.trainable_variables)
        return loss, [tf.convert_to_tensor(g) for g in grads]  # embedding lookups give IndexedSlices

    def _replica_compute(self, tokens: tf.Tensor):
        stream = self.engine.replica_index()  # this replica's own dropout masks

        def add_micro_batch(i, summed):
            micro_loss, micro_grads = self._micro_grads(tokens[i], stream)
            return summed[0] + micro_loss, [a + b for a, b in zip(summed[1], micro_grads, strict=True)]

        loss, grads = accumulate(add_micro_batch, self.accumulation_steps, self._micro_grads(tokens[0], stream))
        grads = self.engine.reduce_gradients(grads)
        loss = self.engine.sum_over_replicas(loss)
        if self.precision == "fp16":  # elsewhere the scale is 1: dividing would be a pass over every gradient
            grads = [g / self.loss_scale for g in grads]
        norm = tf.linalg.global_norm(grads)  # NaN or Inf if any gradient is
        if self.grad_clip > 0:
            grads, _ = tf.clip_by_global_norm(grads, self.grad_clip, use_norm=norm)
        return loss, norm, grads

    def _compute_fn(self, batch: tf.Tensor):
        loss, norm, grads = self.engine.run(self._replica_compute, (batch,))
        return self.engine.local(loss), self.engine.local(norm), grads

    def _apply_fn(self, grads):
        self.engine.strategy.run(lambda g: self.optimizer.apply(g, self.model.trainable_variables), args=(grads,))

    def _step_fn(self, batch: tf.Tensor) -> tf.Tensor:
        """One step on the device: compute, then apply only if the loss and the norm are finite."""
        loss, norm, grads = self._compute_fn(batch)
        finite = tf.math.is_finite(loss) & tf.math.is_finite(norm)  # the same on every replica: both all-reduced
        # A cond in the cross-replica context, around the strategy's run: Keras' LossScaleOptimizer does the same
        # (a cond in a replica context cannot hold the optimizer's merge_call).
        tf.cond(finite, lambda: self._apply_fn(grads), lambda: None)
        self.step.assign_add(1)
        self.skipped.assign_add(tf.cast(tf.logical_not(finite), tf.int64))
        if self.precision == "fp16":
            self._update_loss_scale(finite)
        figures = [loss, norm, finite, self.skipped, self.optimizer.learning_rate]
        return tf.stack([tf.cast(f, tf.float32) for f in figures])

    def _update_loss_scale(self, finite: tf.Tensor) -> None:
        """Dynamic loss scaling: halve after a skipped step, double after ``loss_scale_period`` finite ones."""
        grow = finite & (self.good_steps + 1 >= self.loss_scale_period)
        scale = tf.where(finite, tf.where(grow, 2 * self.loss_scale, self.loss_scale), self.loss_scale / 2)
        self.loss_scale.assign(scale)
        self.good_steps.assign(tf.where(finite & tf.logical_not(grow), self.good_steps + 1, 0))

    def _replica_evaluate(self, rows: tf.Tensor):
        logits = self.model(rows[:, :-2], training=False)  # every token but the last; no weight column
        return self.engine.sum_over_replicas(evaluation_loss_sums(logits, rows, self.token_bytes))

    def _evaluate_fn(self, batch: tf.Tensor):
        return self.engine.local(self.engine.run(self._replica_evaluate, (batch,)))

    # --- host -------------------------------------------------------------------------------------

    def trace(self) -> None:
        """Traces the step for the trainer's batch shape without running it."""
        with self.engine.scope():
            self._step.get_concrete_function(tf.TensorSpec(self.batch_shape, tf.int32))

    def train_step(self, batch: tf.Tensor) -> StepResult:
        """Launches one optimizer step on ``batch`` ([local_replicas, accumulation, micro_batch, T + 1] int32);
        nothing is read back until the result's figures are asked for."""
        if tuple(batch.shape) != self.batch_shape:  # the loss divides by the tokens this shape holds
            raise ValueError(f"batch shape {tuple(batch.shape)} is not the trainer's {self.batch_shape}")
        with self.engine.scope():
            return StepResult(self._step(batch))

    def evaluate(self, dataset: tf.data.Dataset) -> Evaluation:
        """Mean token loss, bits per byte and their standard errors over the sequences of ``dataset``
        (``data.evaluation_dataset``)."""
        return Evaluation.from_sums(*self.evaluation_sums(dataset))

    def evaluation_sums(self, dataset: tf.data.Dataset) -> np.ndarray:
        """``evaluation_loss_sums`` over every batch of ``dataset``: the sums of two datasets add up to their
        union's."""
        total = 0.0
        with self.engine.scope():
            for batch in dataset:
                total += self._evaluate(batch).numpy().astype(np.float64)  # sums of squares over many batches
        return total


def accumulate(add: Callable[[tf.Tensor, Any], Any], count: int, first: Any) -> Any:
    """``first`` with ``add(i, summed)`` applied for i = 1 .. count - 1, one iteration in flight at a time.

    A ``tf.while_loop`` with ``parallel_iterations=1``: an iteration that depends only on its own micro-batch
    can otherwise start before the previous one ends (autograph's loops allow 10), each holding its activations,
    and the memory estimate counts one micro-batch. ``run/trainer_test.py`` checks every loop of a step.

    Example:
        >>> accumulate(lambda i, s: s + tf.cast(i, tf.float32), 4, tf.constant(0.0))  # 0 + 1 + 2 + 3
        <tf.Tensor: shape=(), dtype=float32, numpy=6.0>
    """
    if count <= 1:
        return first
    _, summed = tf.while_loop(
        lambda i, _: i < count, lambda i, s: (i + 1, add(i, s)), (tf.constant(1), first), parallel_iterations=1
    )
    return summed


def evaluation_loss_sums(logits: tf.Tensor, rows: tf.Tensor, token_bytes: tf.Tensor | None) -> tf.Tensor:
    """What evaluation sums over ``rows`` ([rows, T + 2]: T + 1 tokens, then the row's weight) from ``logits``
    ([rows, T, vocab], on each row's first T tokens): the targets' cross-entropy in ``sequence_loss_sums``, then
    in ``byte_loss_sums`` when ``token_bytes`` (float32, each id's UTF-8 bytes) is given. ``tests/hf/reference.py``
    holds its bits per byte against transformers'."""
    tokens, weights = rows[:, :-1], rows[:, -1]
    token_losses = tf.nn.sparse_softmax_cross_entropy_with_logits(tokens[:, 1:], logits)
    sums = sequence_loss_sums(token_losses, weights)
    if token_bytes is None:
        return sums
    return tf.concat([sums, byte_loss_sums(token_losses, weights, tf.gather(token_bytes, tokens[:, 1:]))], 0)


def sequence_loss_sums(token_losses: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    """[sum w s, sum w s^2, sum w] of each row's mean token loss s ([rows, T] losses; w: 1, or 0 for filler)."""
    losses, weights = tf.reduce_mean(token_losses, axis=1), tf.cast(weights, tf.float32)
    return tf.stack([tf.reduce_sum(weights * losses), tf.reduce_sum(weights * losses**2), tf.reduce_sum(weights)])


def byte_loss_sums(token_losses: tf.Tensor, weights: tf.Tensor, target_bytes: tf.Tensor) -> tf.Tensor:
    """[sum w L, sum w B, sum w L^2, sum w B^2, sum w L B] of each row's summed nats L and target bytes B."""
    nats, size = tf.reduce_sum(token_losses, axis=1), tf.reduce_sum(target_bytes, axis=1)
    weights = tf.cast(weights, tf.float32)
    return tf.stack([tf.reduce_sum(weights * v) for v in (nats, size, nats**2, size**2, nats * size)])
