"""Data-parallel engines: who computes which replica, and how gradients are summed across replicas.

``Engine`` is what the run (``loop.py``) and both trainers ask of every engine: its workers and replicas, its
scope, a flag agreed by every worker. A data-parallel engine (``DataParallelEngine``) runs ``Trainer``'s step,
where the two engines here differ in four operations:

    run(fn, args)            run fn once per local replica (device)
    gradient(tape, ...)      a replica's gradients (Horovod: already all-reduced)
    reduce_gradients(grads)  sum gradients over every replica of every worker
    sum_over_replicas(x)     sum a metric (loss, token count) the same way

``strategy``     tf.distribute default, MirroredStrategy (several GPUs, one process) or
                 MultiWorkerMirroredStrategy (one process per host, NCCL between GPUs, RING on CPU).
``horovod``      one process per device started by MPI: ``horovod.tensorflow`` or SageMaker's
                 ``smdistributed.dataparallel.tensorflow`` (same API). Not available in the TF 2.21
                 images; kept small and separate.

``pipeline``     model_parallel_degree K > 1: each replica is a pipeline of K devices of one process, gradients
                 summed across replicas by collective ops on each stage's device: ``PipelineEngine``, beside
                 its trainer in ``pipeline_trainer.py``.

Across hosts, both kinds start the cluster the same way (``start_multi_worker``).

With MultiWorkerMirroredStrategy every worker starts from the chief's initial values (the strategy
broadcasts them when variables are created); Horovod broadcasts rank 0's variables after the first step.
Only the chief (worker 0 / rank 0) writes checkpoints, exports and logs.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any, Protocol

import tensorflow as tf

ENGINES = ("auto", "mirrored", "multi_worker", "horovod")
HOROVOD_MODULES = ("smdistributed.dataparallel.tensorflow", "horovod.tensorflow")
MWMS_PORT = 8890  # the port the SageMaker toolkit uses in the TF_CONFIG it writes
# Gradients are all-reduced in packs of about this many bytes. TensorFlow's default (bytes_per_pack 0)
# concatenates every gradient into one buffer, so nothing is sent before the whole buffer is built; NCCL's
# bandwidth on large messages is reached well below 32 MiB (PyTorch DDP's buckets: 25 MiB).
BYTES_PER_PACK = 32 * 2**20
# Gradients travel in float32 whatever the training precision. On GPUs every collective goes through NCCL, and
# TensorFlow passes NCCL five dtypes only: the NcclAllReduce op's T (MirroredStrategy's default on a GPU host)
# and NcclManager's kValidDataTypes (tensorflow/core/nccl/nccl_manager.cc, MultiWorkerMirroredStrategy's NCCL
# path) are half, float, double, int32 and int64; a bfloat16 gradient fails the first step. float32 is also what
# Megatron and torchtitan reduce gradients in. ``engines_test`` builds each step as a GPU host builds it.
WIRE_DTYPE = tf.float32


class Engine(Protocol):
    """What the run and both trainers ask of every engine (``StrategyEngine``, ``HorovodEngine``,
    ``pipeline_trainer.PipelineEngine``); ``worker`` and ``workers`` count processes, not devices."""

    name: str
    worker: int
    workers: int

    @property
    def num_replicas(self) -> int:
        """Replicas over every worker: each computes its share of the global batch."""

    @property
    def local_replicas(self) -> int:
        """Replicas this process drives (the first axis of its batches)."""

    @property
    def is_chief(self) -> bool:
        """Whether this worker writes checkpoints, exports and logs."""

    def scope(self) -> AbstractContextManager:
        """Where variables are created and steps run."""

    def after_first_step(self, variables: list) -> None:
        """Makes every worker's variables the chief's, where creating them did not."""

    def sum_over_workers(self, values: list[float]) -> list[float]:
        """Each of ``values`` summed over the workers, on the host (one small all-reduce, waited for); every worker
        calls it at the same point with as many values."""


def any_worker(engine: Engine, flag: bool) -> bool:
    """Whether any worker passed True; every worker calls it at the same point."""
    return engine.sum_over_workers([float(flag)])[0] > 0


def first_replica_rows(values: list[float], local_replicas: int) -> tf.Tensor:
    """[local_replicas, n] float32: ``values`` for this worker's first replica, zeros for its others, so that their
    sum over every replica is the values summed over the workers."""
    return tf.cast(tf.concat([[values], tf.zeros([local_replicas - 1, len(values)])], 0), tf.float32)


class DataParallelEngine(Engine, Protocol):
    """An engine of single-device replicas: what ``Trainer``'s step asks of it besides ``Engine``."""

    strategy: tf.distribute.Strategy  # the optimizer's update runs in it
    bytes_per_pack: int  # the gradients are all-reduced in buffers of about this many bytes

    def run(self, fn: Callable, args: tuple = ()) -> Any:
        """Runs ``fn`` on each local replica; ``args[0]`` is a [local_replicas, ...] batch split between them."""

    def gradient(self, tape: tf.GradientTape, loss: tf.Tensor, variables: list) -> list:
        """This replica's gradients of ``loss``."""

    def reduce_gradients(self, grads: list) -> list:
        """Gradients summed over every replica of every worker, float32."""

    def sum_over_replicas(self, value: Any) -> Any:
        """A metric (or a structure of them) summed over every replica of every worker."""

    def local(self, value: Any) -> Any:
        """One replica's copy of a value that all-reduction made identical on every replica."""

    def replica_index(self) -> tf.Tensor:
        """This replica's index among every replica of every worker (call on a replica): its dropout stream."""


class StrategyEngine:
    """A ``DataParallelEngine`` over a tf.distribute strategy; ``worker`` / ``workers`` count processes (hosts).

    Gradients are summed in packs of BYTES_PER_PACK, in WIRE_DTYPE. TensorFlow 2.21 launches the packs
    in reverse variable order (the last layers', whose gradients a backward pass computes first, before the
    first layers'), one collective after the other; a pack starts when its gradients exist. They all exist at
    once here: the step's gradients are the sum over its micro-batches (``Trainer``), so the reduction follows
    the whole backward pass and overlaps only its own packs' concatenation and copies.

    Args:
        strategy: the strategy; create it first thing in the process (MultiWorkerMirroredStrategy needs that).
        name: "default", "mirrored" or "multi_worker" (for logs).
        worker: this process's index among the workers.
        workers: number of worker processes.
    """

    bytes_per_pack = BYTES_PER_PACK

    def __init__(self, strategy: tf.distribute.Strategy, name: str, worker: int = 0, workers: int = 1):
        self.strategy, self.name, self.worker, self.workers = strategy, name, worker, workers

    @property
    def num_replicas(self) -> int:
        return self.strategy.num_replicas_in_sync

    @property
    def local_replicas(self) -> int:
        return self.num_replicas // self.workers

    @property
    def is_chief(self) -> bool:
        return self.worker == 0

    def scope(self):
        return self.strategy.scope()

    def run(self, fn, args: tuple = ()):
        """Runs ``fn`` on each local replica; ``args[0]`` is a [local_replicas, ...] batch split between them."""
        batch, *rest = args
        per_replica = self.strategy.experimental_distribute_values_from_function(
            lambda context: batch[context.replica_id_in_sync_group - self.worker * self.local_replicas]
        )
        return self.strategy.run(fn, args=(per_replica, *rest))

    def gradient(self, tape: tf.GradientTape, loss: tf.Tensor, variables: list) -> list:
        return tape.gradient(loss, variables)

    def reduce_gradients(self, grads: list) -> list:
        if self.num_replicas == 1:
            return grads
        options = tf.distribute.experimental.CommunicationOptions(bytes_per_pack=self.bytes_per_pack)
        sent = [tf.cast(g, WIRE_DTYPE) for g in grads]  # float32 already: the variables' dtype
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, sent, options=options)

    def sum_over_replicas(self, value):
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, value)

    def local(self, value):
        """One replica's copy of a value that all-reduction made identical on every replica."""
        return self.strategy.experimental_local_results(value)[0]

    def replica_index(self) -> tf.Tensor:
        return tf.convert_to_tensor(tf.distribute.get_replica_context().replica_id_in_sync_group)

    def after_first_step(self, variables: list) -> None:
        """Nothing to do: the strategy created every variable with the chief's initial value."""

    def sum_over_workers(self, values: list[float]) -> list[float]:
        """Each value summed over the workers: every worker's first replica contributes it, its others zeros."""
        if self.workers == 1:
            return list(values)
        with self.scope():
            return self.worker_sum(first_replica_rows(values, self.local_replicas)).numpy().tolist()

    @functools.cached_property
    def worker_sum(self) -> Callable[[tf.Tensor], tf.Tensor]:
        """[local_replicas, n] float32 rows, one a replica -> their sum over every replica (a tf.function)."""
        # tf.identity: MultiWorkerMirroredStrategy cannot all-reduce a distributed input as it is.
        return tf.function(lambda rows: self.local(self.run(lambda r: self.sum_over_replicas(tf.identity(r)), (rows,))))


class HorovodEngine:
    """A ``DataParallelEngine`` of one process per device (rank), gradients all-reduced by ``DistributedGradientTape``.

    The tape averages over ranks; the training step's loss is already a share of the global mean
    (sum over this rank's tokens / global tokens), so the average is multiplied back by ``size``.
    With gradient accumulation the tape all-reduces every micro-batch (more traffic than the
    strategy engine, which all-reduces once per step).

    Args:
        hvd: the imported ``horovod.tensorflow`` or ``smdistributed.dataparallel.tensorflow`` module.
        pin_gpu: make only the local rank's GPU visible (call before TensorFlow uses a GPU).
    """

    name = "horovod"
    bytes_per_pack = 64 * 2**20  # Horovod's fusion buffer (HOROVOD_FUSION_THRESHOLD's default)

    def __init__(self, hvd: ModuleType, pin_gpu: bool = True):
        self.hvd = hvd
        hvd.init()
        self.worker, self.workers = hvd.rank(), hvd.size()
        self.strategy = tf.distribute.get_strategy()
        gpus = tf.config.list_physical_devices("GPU")
        if pin_gpu and gpus:
            tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")  # one process per device
            tf.config.experimental.set_memory_growth(gpus[hvd.local_rank()], True)

    num_replicas = property(lambda self: self.workers)
    local_replicas = 1
    is_chief = property(lambda self: self.worker == 0)

    def scope(self):
        return self.strategy.scope()

    def run(self, fn, args: tuple = ()):
        batch, *rest = args
        return fn(batch[0], *rest)

    def gradient(self, tape: tf.GradientTape, loss: tf.Tensor, variables: list) -> list:
        # sparse_as_dense: the embedding's IndexedSlices gradient is all-reduced as one dense tensor
        # instead of all-gathering every looked-up row.
        grads = self.hvd.DistributedGradientTape(tape, sparse_as_dense=True).gradient(loss, variables)
        return [tf.convert_to_tensor(g) * self.workers for g in grads]

    def reduce_gradients(self, grads: list) -> list:
        return grads  # DistributedGradientTape has all-reduced them

    def sum_over_replicas(self, value):
        # smdistributed keeps allreduce for gradients and offers oob_allreduce for other tensors.
        allreduce = getattr(self.hvd, "oob_allreduce", self.hvd.allreduce)
        return tf.nest.map_structure(lambda v: allreduce(v) * self.workers, value)  # average x size = sum

    def local(self, value):
        return value

    def replica_index(self) -> tf.Tensor:
        return tf.constant(self.worker)

    def after_first_step(self, variables: list) -> None:
        """Every rank takes rank 0's values (the Horovod pattern: broadcast after the first step)."""
        self.hvd.broadcast_variables([getattr(v, "value", v) for v in variables], root_rank=0)

    def sum_over_workers(self, values: list[float]) -> list[float]:
        return self.sum_over_replicas(tf.constant(values, tf.float32)).numpy().tolist()  # one rank per worker


def import_horovod() -> ModuleType | None:
    """The first Horovod-API module that imports, or None."""
    for name in HOROVOD_MODULES:
        try:
            return importlib.import_module(name)
        except Exception:  # ImportError, or a library built for another TensorFlow
            continue
    return None


def launched_by_mpi(env: dict) -> bool:
    return any(key in env for key in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))


def sagemaker_tf_config(hosts: list[str], current_host: str) -> str:
    """The TF_CONFIG that SageMaker writes for MultiWorkerMirroredStrategy, built from SM_HOSTS."""
    return json.dumps(
        {
            "cluster": {"worker": [f"{host}:{MWMS_PORT}" for host in hosts]},
            "task": {"type": "worker", "index": hosts.index(current_host)},
        }
    )


def choose_engine(engine: str, *, hosts: list[str], num_gpus: int, env: dict) -> str:
    """auto: Horovod API if importable and launched by MPI, else multi_worker for TF_CONFIG or several
    hosts, else mirrored for several GPUs, else the default single-device strategy ("default")."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    if engine != "auto":
        return engine
    if launched_by_mpi(env) and import_horovod() is not None:
        return "horovod"
    if "TF_CONFIG" in env or len(hosts) > 1:
        return "multi_worker"
    return "mirrored" if num_gpus > 1 else "default"


def worker_position(resolver) -> tuple[int, int]:
    """(index, count) of this worker; a "chief" task, when the cluster has one, is worker 0."""
    cluster = resolver.cluster_spec().as_dict()
    workers = sum(len(tasks) for tasks in cluster.values()) or 1
    if resolver.task_type == "chief":
        return 0, workers
    return (resolver.task_id or 0) + len(cluster.get("chief", [])), workers


def cluster_config(hosts: list[str], current_host: str, env: Mapping[str, str]) -> dict:
    """This worker's TF_CONFIG as a dict: ``env``'s, else SageMaker's from SM_HOSTS when there are several hosts,
    else empty (one worker)."""
    if "TF_CONFIG" in env:
        return json.loads(env["TF_CONFIG"])
    return json.loads(sagemaker_tf_config(hosts, current_host)) if len(hosts) > 1 else {}


class ConfigClusterResolver(tf.distribute.cluster_resolver.TFConfigClusterResolver):
    """TensorFlow's TF_CONFIG resolver, reading a given TF_CONFIG instead of ``os.environ``'s (which it reads
    whenever asked, for the strategy's whole life): the start-up sets no environment variable."""

    def __init__(self, config: dict):
        task = config.get("task", {})
        super().__init__(task_type=task.get("type"), task_id=task.get("index"), rpc_layer=config.get("rpc_layer"))
        self.config = config

    def cluster_spec(self) -> tf.train.ClusterSpec:
        return tf.train.ClusterSpec(self.config.get("cluster", {}))


def start_multi_worker(
    hosts: list[str], current_host: str, env: Mapping[str, str], communication: str
) -> tuple[tf.distribute.MultiWorkerMirroredStrategy, int, int]:
    """Joins this process to the cluster of workers: (the MultiWorkerMirroredStrategy, this worker's index, the
    number of workers). Call before any other TensorFlow work in the process.

    The cluster is ``cluster_config``'s; neither ``env`` nor ``os.environ`` is changed.

    Args:
        hosts, current_host: SM_HOSTS and SM_CURRENT_HOST.
        env: the process environment (TF_CONFIG, when a launcher wrote one).
        communication: the collectives' implementation, "nccl" (GPUs) or "ring" (CPU, gRPC between hosts).
    """
    implementation = getattr(tf.distribute.experimental.CommunicationImplementation, communication.upper())
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        cluster_resolver=ConfigClusterResolver(cluster_config(hosts, current_host, env)),
        communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation),
    )
    return strategy, *worker_position(strategy.cluster_resolver)


def make_engine(
    engine: str,
    *,
    hosts: list[str],
    current_host: str,
    num_gpus: int,
    env: Mapping[str, str] = os.environ,
) -> DataParallelEngine:
    """Creates the engine; call before any other TensorFlow work in the process."""
    name = choose_engine(engine, hosts=hosts, num_gpus=num_gpus, env=env)
    if name == "horovod":
        hvd = import_horovod()
        if hvd is None:
            raise RuntimeError(f"engine horovod: none of {', '.join(HOROVOD_MODULES)} imports here")
        return HorovodEngine(hvd)
    if name == "multi_worker":
        communication = "nccl" if tf.config.list_physical_devices("GPU") else "ring"
        strategy, worker, workers = start_multi_worker(hosts, current_host, env, communication)
        return StrategyEngine(strategy, name, worker, workers)
    if name == "mirrored":
        return StrategyEngine(tf.distribute.MirroredStrategy(), name)
    return StrategyEngine(tf.distribute.get_strategy(), "default")
