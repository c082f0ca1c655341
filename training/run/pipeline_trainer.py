"""The pipeline-parallel training step: GPipe over K devices per replica, gradients summed over replicas.

    on every local replica (K devices, ``PipelineEngine``, at the end of this file):
        for each of accumulation / microbatches passes:
            one GPipe pass over `microbatches` micro-batches (gpt/pipeline/gpipe.py)
            -> loss and gradients, each gradient on its variable's stage device, summed over the passes
    for each stage k: pack stage k's gradients (and, on the last stage, the loss), all-reduce SUM over replicas
    grads /= loss_scale; norm = sqrt(sum over stages of each stage's sum of squares, the chief replica's); clip
    keep the gradients in buffers (variables on the stage devices)
    host: if the loss and the norm are finite, AdamW applies the buffers, each variable's update on its device

The arithmetic is ``Trainer``'s: a micro-batch's loss is its summed token cross-entropy / the tokens of the
global batch, so the summed loss is the global mean and the step equals the single-device step on the same
batch. The gradients stay in buffers between the two tf.functions because a tf.function returns its outputs
on the caller's device: returning them would copy every stage's gradients to device 0.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Mapping

import numpy as np
import tensorflow as tf
from contract.batch import pipeline_microbatches
from gpt.loss import sparse_cross_entropy
from gpt.pipeline.gpipe import gpipe_gradients
from gpt.pipeline.model import PipelinedGPT, stage_of, variable_device

from run.engines import choose_engine, first_replica_rows, start_multi_worker
from run.trainer import AdamW, Trainer, accumulate, evaluation_loss_sums, make_optimizer


class PlacedAdamW(AdamW):
    """AdamW whose arithmetic for each variable runs on that variable's device.

    Keras creates the moments next to their variables but leaves the update arithmetic without a device;
    TensorFlow's placer then puts it on device 0 and copies every stage's weights, moments and gradients there.
    """

    def _update(self, variable, gradient, scalars):
        with tf.device(variable_device(variable)):
            super()._update(variable, gradient, scalars)

    def _decay(self, variable, keep):
        with tf.device(variable_device(variable)):
            super()._decay(variable, keep)


def make_pipeline_optimizer(model: PipelinedGPT, learning_rate, **kwargs) -> PlacedAdamW:
    """``trainer.make_optimizer`` with PlacedAdamW, its step counter on the first stage's device."""
    with tf.device(model.devices[0]):
        return make_optimizer(model, learning_rate, optimizer_class=PlacedAdamW, **kwargs)


class PipelineTrainer(Trainer):
    """Training and evaluation steps of pipelined GPT replicas; the host side (``train_step``) is ``Trainer``'s.

    Args:
        models: one PipelinedGPT per local replica, on that replica's devices (``engine.replica_devices``).
        optimizers: one ``make_pipeline_optimizer`` per model.
        engine: a PipelineEngine.
        accumulation_steps: micro-batches per optimizer step on each replica.
        microbatches: micro-batches per GPipe pass (M); divides accumulation_steps; 0 = the fewest that bound the
            bubble (``contract.batch.pipeline_microbatches``).
        micro_batch_size, sequence_length, precision, grad_clip, initial_loss_scale: as ``Trainer``.

    Usage (a model, optimizer and engine as ``run.loop`` makes them)::

        trainer = PipelineTrainer([model], [optimizer], engine, accumulation_steps=8, microbatches=8,
                                  micro_batch_size=4, sequence_length=1024)
        result = trainer.train_step(batch)  # batch: [local_replicas, 8, 4, 1025] int32; a StepResult
    """

    def __init__(
        self,
        models: list[PipelinedGPT],
        optimizers: list[PlacedAdamW],
        engine: PipelineEngine,
        *,
        accumulation_steps: int,
        microbatches: int = 0,
        micro_batch_size: int,
        sequence_length: int,
        precision: str = "fp32",
        grad_clip: float = 1.0,
        initial_loss_scale: float = 2.0**15,
        token_bytes: np.ndarray | None = None,
    ):
        microbatches = pipeline_microbatches(accumulation_steps, microbatches, stages=len(models[0].devices))
        if len(models) != engine.local_replicas or len(optimizers) != len(models):
            raise ValueError(f"expected {engine.local_replicas} models and optimizers, one per local replica")
        super().__init__(
            models[0],
            optimizers[0],
            engine,
            accumulation_steps=accumulation_steps,
            micro_batch_size=micro_batch_size,
            sequence_length=sequence_length,
            precision=precision,
            grad_clip=grad_clip,
            initial_loss_scale=initial_loss_scale,
            token_bytes=token_bytes,
        )
        self.models, self.optimizers = list(models), list(optimizers)
        self.microbatches, self.passes = microbatches, accumulation_steps // microbatches
        devices = self.model.devices
        self.stage_indices = [  # positions in trainable_variables of each stage's variables (same for every replica)
            [i for i, v in enumerate(self.model.trainable_variables) if stage_of(v, devices) == k]
            for k in range(len(devices))
        ]
        self.buffers = []
        for model in self.models:
            replica_buffers = []
            for variable in model.trainable_variables:
                with tf.device(variable_device(variable)):
                    replica_buffers.append(tf.Variable(tf.zeros(variable.shape, tf.float32), trainable=False))
            self.buffers.append(replica_buffers)
        # True on the chief replica (worker 0's replica 0) only. A variable rather than a Python constant, so that
        # every worker traces the same graph: TensorFlow's scoped allocator (on under MultiWorkerMirroredStrategy)
        # merges collectives whose inputs are constants differently, and the workers' collectives then disagree.
        self.chief_replica = []
        for r, model in enumerate(self.models):
            with tf.device(model.devices[0]):
                self.chief_replica.append(tf.Variable(engine.is_chief and r == 0, trainable=False))
        self._broadcast = tf.function(self._broadcast_fn)
        self._in_sync = engine.num_replicas == 1

    # --- one replica ------------------------------------------------------------------------------

    def _micro_loss(self, logits: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
        """A micro-batch's share of the global mean loss: its summed token losses / tokens in the global batch."""
        token_losses = sparse_cross_entropy(tf.reshape(targets, [-1]), tf.reshape(logits, [-1, logits.shape[-1]]))
        return tf.reduce_sum(token_losses) / self.tokens_per_step  # the single-device GPT.loss_sum's arithmetic

    def _replica_gradients(self, model: PipelinedGPT, tokens: tf.Tensor, replica: int):
        """Loss and gradients of local replica ``replica``'s [accumulation, micro_batch, T + 1] tokens: GPipe passes,
        summed."""
        tokens = tf.reshape(tokens, [self.passes, self.microbatches, *tokens.shape[1:]])
        stream = tf.constant(self.engine.worker * self.engine.local_replicas + replica)  # its own dropout masks

        def add_pass(p, summed):
            pass_loss, pass_grads = gpipe_gradients(model, tokens[p], self._micro_loss, self.loss_scale, stream)
            with tf.device(model.devices[-1]):
                loss = summed[0] + pass_loss
            grads = []
            for variable, a, b in zip(model.trainable_variables, summed[1], pass_grads, strict=True):
                with tf.device(variable_device(variable)):
                    grads.append(a + b)
            return loss, grads

        first = gpipe_gradients(model, tokens[0], self._micro_loss, self.loss_scale, stream)
        return accumulate(add_pass, self.passes, first)

    def _unscale_and_square(self, model: PipelinedGPT, grads: list) -> tuple[list, list]:
        """grads / loss_scale, and each stage's sum of squared gradients; each stage's arithmetic on its device."""
        grads, squares = list(grads), []
        for device, indices in zip(model.devices, self.stage_indices, strict=True):
            with tf.device(device):
                for i in indices:
                    grads[i] = grads[i] / self.loss_scale
                squares.append(tf.add_n([tf.reduce_sum(tf.square(grads[i])) for i in indices]))
        return grads, squares

    def _clip(self, model: PipelinedGPT, grads: list, squares: list) -> tuple[tf.Tensor, list]:
        """Clips to grad_clip by the global norm sqrt(sum of the stages' squares); returns (norm, clipped grads)."""
        grads = list(grads)
        with tf.device(model.devices[0]):
            norm = tf.sqrt(tf.add_n(squares))  # NaN or Inf if any gradient is
            # tf.clip_by_global_norm's factor: 1 below the limit, grad_clip / norm above it.
            scale = self.grad_clip * tf.minimum(1.0 / norm, 1.0 / self.grad_clip) if self.grad_clip > 0 else None
        if scale is not None:
            for device, indices in zip(model.devices, self.stage_indices, strict=True):
                with tf.device(device):
                    for i in indices:
                        grads[i] = grads[i] * scale
        return norm, grads

    # --- all replicas -----------------------------------------------------------------------------

    def _sum_over_replicas(self, losses: list, grads: list[list]) -> tuple[list, list[list]]:
        """Stage by stage: pack each replica's stage gradients (and the loss, last stage), all-reduce, unpack."""
        if self.engine.num_replicas == 1:
            return losses, grads
        losses, grads = list(losses), [list(g) for g in grads]
        last = len(self.stage_indices) - 1
        for k, indices in enumerate(self.stage_indices):
            sizes = [grads[0][i].shape.num_elements() for i in indices] + ([1] if k == last else [])
            packs = []
            for r, model in enumerate(self.models):
                with tf.device(model.devices[k]):
                    parts = [tf.reshape(grads[r][i], [-1]) for i in indices]
                    packs.append(tf.concat(parts + ([tf.reshape(losses[r], [1])] if k == last else []), 0))
            summed = self.engine.all_reduce(packs, k, "gradients")
            for r, (model, pack) in enumerate(zip(self.models, summed, strict=True)):
                with tf.device(model.devices[k]):
                    pieces = tf.split(pack, sizes)
                    for i, piece in zip(indices, pieces, strict=False):
                        grads[r][i] = tf.reshape(piece, grads[r][i].shape)
                    if k == last:
                        losses[r] = tf.reshape(pieces[-1], [])
        return losses, grads

    def _from_chief(self, replica: int, value: tf.Tensor) -> tf.Tensor:
        """``value`` on the chief replica, zeros elsewhere: summed over the replicas, the chief's value."""
        return tf.where(self.chief_replica[replica], value, tf.zeros_like(value))

    def _chief_squares(self, squares: list[list]) -> list[list]:
        """Every replica takes the chief replica's per-stage sums of squares (a scalar all-reduce per stage).

        The replicas hold bit-identical gradients after the all-reduce, but TensorFlow's CPU reductions are not
        always bit-reproducible (seen: norms 1 ulp apart on two replicas of one process); clipping with
        different norms would let the replicas' weights drift apart.
        """
        if self.engine.num_replicas == 1:
            return squares
        shared = [list(replica) for replica in squares]
        for k in range(len(self.stage_indices)):
            values = []
            for r, model in enumerate(self.models):
                with tf.device(model.devices[k]):
                    values.append(self._from_chief(r, squares[r][k]))
            for r, value in enumerate(self.engine.all_reduce(values, k, "squares")):
                shared[r][k] = value
        return shared

    def _compute_fn(self, batch: tf.Tensor):
        losses, grads = [], []
        for r, model in enumerate(self.models):
            loss, replica_grads = self._replica_gradients(model, batch[r], r)
            losses.append(loss)
            grads.append(replica_grads)
        losses, grads = self._sum_over_replicas(losses, grads)
        unscaled = [self._unscale_and_square(model, g) for model, g in zip(self.models, grads, strict=True)]
        squares = self._chief_squares([stage_squares for _, stage_squares in unscaled])
        norms = []
        for model, (replica_grads, _), replica_squares, buffers in zip(
            self.models, unscaled, squares, self.buffers, strict=True
        ):
            norm, replica_grads = self._clip(model, replica_grads, replica_squares)
            norms.append(norm)
            for buffer, grad in zip(buffers, replica_grads, strict=True):
                buffer.assign(grad)  # a resource op: runs on the buffer's device
        return losses[0], norms[0], ()

    def _apply_fn(self, grads):
        """Applies the buffered gradients (``grads`` is the empty tuple ``_compute`` returns)."""
        for model, optimizer, buffers in zip(self.models, self.optimizers, self.buffers, strict=True):
            optimizer.apply([b.read_value() for b in buffers], model.trainable_variables)

    def _evaluate_fn(self, batch: tf.Tensor):
        sums = []
        for r, model in enumerate(self.models):
            logits = model(batch[r][:, :-2], training=False)  # every token but the last; no weight column
            with tf.device(model.devices[-1]):
                sums.append(evaluation_loss_sums(logits, batch[r], self.token_bytes))
        return self.engine.all_reduce(sums, len(self.model.devices) - 1, "evaluation")[0]

    def _broadcast_fn(self):
        """Every replica takes the chief replica's weights, AdamW state and dropout seed states.

        One all-reduce per variable, in ``variables`` order, each after the previous one: the chief replica
        contributes its value, every other replica zeros. In float64, which holds float32 and int64 exactly.
        """
        replicas = [[*m.variables, *o.variables] for m, o in zip(self.models, self.optimizers, strict=True)]
        done = None
        for i, variable in enumerate(replicas[0]):
            values = []
            for r, variables in enumerate(replicas):
                after_previous = tf.control_dependencies([done] if done is not None else [])
                with tf.device(variable_device(variables[i])), after_previous:
                    value = tf.cast(tf.convert_to_tensor(variables[i]), tf.float64)
                    values.append(self._from_chief(r, value))
            stage = stage_of(variable, self.model.devices)
            assigns = []
            for variables, value in zip(replicas, self.engine.all_reduce(values, stage, f"broadcast/{i}"), strict=True):
                with tf.device(variable_device(variables[i])):
                    assigns.append(variables[i].assign(tf.cast(value, variables[i].dtype)))
            done = tf.group(*assigns)

    # --- host -------------------------------------------------------------------------------------

    def sync_replicas(self) -> None:
        """Copies the chief replica's state to every replica (done before the first step; again after a restore)."""
        if self.engine.num_replicas > 1:
            self._broadcast()
        self._in_sync = True

    def train_step(self, batch: tf.Tensor):
        if not self._in_sync:
            self.sync_replicas()
        return super().train_step(batch)

    def evaluation_sums(self, dataset: tf.data.Dataset) -> np.ndarray:
        if not self._in_sync:
            self.sync_replicas()
        return super().evaluation_sums(dataset)


def build_pipeline_replicas(
    engine: PipelineEngine, build_model, learning_rate, **optimizer_kwargs
) -> tuple[list[PipelinedGPT], list[PlacedAdamW]]:
    """One model (``build_model(devices)``) and one PlacedAdamW per local replica of ``engine``."""
    models, optimizers = [], []
    for devices in engine.replica_devices:
        model = build_model(devices)
        models.append(model)
        optimizers.append(make_pipeline_optimizer(model, learning_rate, **optimizer_kwargs))
    return models, optimizers


# --- the engine: pipeline replicas and their collectives ------------------------------------------------


class PipelineEngine:
    """An ``engines.Engine`` of pipeline replicas, each K devices of this process, one per stage.

    Local devices [d0, d1, ..., d(D-1)] form D / K replicas: replica r holds stages on d(rK) .. d(rK + K - 1).
    Every worker (host) has the same layout. Replicas' gradients are summed with TensorFlow's collective
    all-reduce, one group per stage position: group k = stage k's device of every replica of every worker
    (8 GPUs, K = 4, 2 hosts: group 0 = GPU 0 and GPU 4 of both hosts). Collectives run on the stage's own
    device, so no device ever holds another stage's gradients.

    tf.distribute strategies cannot express this: their replicas are single devices, and their variables
    and all-reductions are placed on the replica's device. Across hosts a MultiWorkerMirroredStrategy is
    still created, for what it sets up (the cluster's gRPC server and collective runtime); its own
    replicas, variables and ``run`` are not used.

    Args:
        replica_devices: for each local replica, its K stage devices ("/GPU:0", ...).
        worker, workers: this process's index and the number of processes (hosts).
        communication: collective implementation hint, "nccl" (GPUs) or "ring" (CPU, gRPC between hosts).
        strategy: the MultiWorkerMirroredStrategy that started the cluster runtime (kept alive), or None.
    """

    GROUP_KEY_BASE = 50_000  # far above the keys tf.distribute allocates (from 1)
    INSTANCE_KEY_BASE = 500_000

    def __init__(
        self,
        replica_devices: list[list[str]],
        *,
        worker: int = 0,
        workers: int = 1,
        communication: str = "ring",
        strategy: tf.distribute.Strategy | None = None,
    ):
        self.replica_devices, self.worker, self.workers = replica_devices, worker, workers
        self.communication, self.cluster_strategy = communication, strategy
        self.strategy = tf.distribute.get_strategy()  # the default strategy: plain variables on explicit devices
        self.name = "pipeline_multi_worker" if workers > 1 else "pipeline"
        self._instance_keys: dict[tuple, int] = {}

    @property
    def model_parallel_degree(self) -> int:
        return len(self.replica_devices[0])

    @property
    def local_replicas(self) -> int:
        return len(self.replica_devices)

    @property
    def num_replicas(self) -> int:
        return self.workers * self.local_replicas

    @property
    def is_chief(self) -> bool:
        return self.worker == 0

    def scope(self):
        return contextlib.nullcontext()

    def after_first_step(self, variables: list) -> None:
        """Nothing to do: the pipeline trainer broadcasts the chief's values before the first step."""

    def sum_over_workers(self, values: list[float]) -> list[float]:
        """Each value summed over the workers: an all-reduce on stage 0's devices (``first_replica_rows``)."""
        if self.workers == 1:
            return list(values)
        return self.worker_sum(first_replica_rows(values, self.local_replicas)).numpy().tolist()

    @functools.cached_property
    def worker_sum(self):
        """[local_replicas, n] float32 rows, one a replica -> their sum over every replica (a tf.function)."""
        return tf.function(lambda rows: self.all_reduce(tf.unstack(rows), 0, "workers")[0])

    def all_reduce(self, values: list[tf.Tensor], stage: int, name: str) -> list[tf.Tensor]:
        """Sums ``values[r]`` (local replica r's tensor for stage ``stage``) over every replica of every worker.

        Call inside a tf.function; every worker must make the same calls in the same order (the ``name`` picks
        the collective's instance key, which must match across workers). Returns each replica's sum on its
        stage device.
        """
        if self.num_replicas == 1:
            return list(values)
        # One instance key per (name, stage, shape): TensorFlow fixes an instance's shape at its first run.
        signature = (name, stage, tuple(values[0].shape.as_list()))
        key = self._instance_keys.setdefault(signature, self.INSTANCE_KEY_BASE + len(self._instance_keys))
        summed = []
        for devices, value in zip(self.replica_devices, values, strict=True):
            with tf.device(devices[stage]):
                summed.append(
                    tf.raw_ops.CollectiveReduce(
                        input=value,
                        group_size=self.num_replicas,
                        group_key=self.GROUP_KEY_BASE + stage,
                        instance_key=key,
                        merge_op="Add",
                        final_op="Id",
                        subdiv_offsets=[0],
                        communication_hint=self.communication,
                    )
                )
        return summed


def pipeline_layout(kind: str, devices: int, model_parallel_degree: int) -> list[list[str]]:
    """Consecutive devices form a replica's stages: 8 GPUs, K = 4 -> [[GPU:0 .. GPU:3], [GPU:4 .. GPU:7]]."""
    names = [f"/{kind}:{i}" for i in range(devices)]
    return [names[r : r + model_parallel_degree] for r in range(0, devices, model_parallel_degree)]


def split_cpu(devices: int) -> int:
    """Splits the CPU into ``devices`` logical devices (before TensorFlow initialises); returns how many there are."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    with contextlib.suppress(RuntimeError):  # already initialised: keep what there is
        if len(tf.config.get_logical_device_configuration(cpu) or [None]) < devices:
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)
    return len(tf.config.get_logical_device_configuration(cpu) or [None])


def make_pipeline_engine(
    engine: str,
    *,
    model_parallel_degree: int,
    hosts: list[str],
    current_host: str,
    num_gpus: int,
    env: Mapping[str, str] = os.environ,
) -> PipelineEngine:
    """The engine for model_parallel_degree K > 1; call before any other TensorFlow work in the process.

    GPUs: this host's GPUs in groups of K. CPU only: the CPU is split into K logical devices (one replica per
    host; useful for tests, not for speed). Several hosts (or TF_CONFIG): one worker per host, as for
    ``multi_worker``. The Horovod API runs one process per device and cannot drive a K-device pipeline.
    """
    name = choose_engine(engine, hosts=hosts, num_gpus=num_gpus, env=env)
    if name == "horovod":
        raise ValueError(
            f"model_parallel_degree {model_parallel_degree} needs one process driving {model_parallel_degree} "
            "devices; the Horovod API runs one process per device: use engine auto or multi_worker"
        )
    gpus = len(tf.config.list_physical_devices("GPU"))
    local = gpus if gpus else split_cpu(model_parallel_degree)
    if local % model_parallel_degree:
        raise ValueError(
            f"model_parallel_degree {model_parallel_degree} does not divide this host's {local} "
            f"{'GPUs' if gpus else 'logical CPUs'}"
        )
    replica_devices = pipeline_layout("GPU" if gpus else "CPU", local, model_parallel_degree)
    communication = "nccl" if gpus else "ring"
    if name != "multi_worker":
        return PipelineEngine(replica_devices, communication=communication)
    strategy, worker, workers = start_multi_worker(hosts, current_host, env, communication)
    return PipelineEngine(
        replica_devices, worker=worker, workers=workers, communication=communication, strategy=strategy
    )
