"""Data-parallel engines: who computes which replica, and how gradients are summed across replicas.

Every engine runs the same training step; they differ in four operations:

    run(fn, args)            run fn once per local replica (device)
    gradient(tape, ...)      a replica's gradients (Horovod: already all-reduced)
    reduce_gradients(grads)  sum gradients over every replica of every worker
    sum_over_replicas(x)     sum a metric (loss, token count) the same way

``strategy``     tf.distribute default, MirroredStrategy (several GPUs, one process) or
                 MultiWorkerMirroredStrategy (one process per host, NCCL between GPUs, RING on CPU).
``horovod``      one process per device started by MPI: ``horovod.tensorflow`` or SageMaker's
                 ``smdistributed.dataparallel.tensorflow`` (same API). Not available in the TF 2.21
                 images; kept small and separate.

``pipeline``     model_parallel_degree K > 1: each replica is a pipeline of K devices of one process (one process
                 per host drives all its devices: devices / K replicas), gradients summed across replicas by
                 TensorFlow collective ops on each stage's device (see ``PipelineEngine``).

With MultiWorkerMirroredStrategy every worker starts from the chief's initial values (the strategy
broadcasts them when variables are created); Horovod broadcasts rank 0's variables after the first step.
Only the chief (worker 0 / rank 0) writes checkpoints, exports and logs.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
from types import ModuleType

import tensorflow as tf

ENGINES = ("auto", "mirrored", "multi_worker", "horovod")
HOROVOD_MODULES = ("smdistributed.dataparallel.tensorflow", "horovod.tensorflow")
MWMS_PORT = 8890  # the port the SageMaker toolkit uses in the TF_CONFIG it writes
# Gradients are all-reduced in packs of about this many bytes. TensorFlow's default (bytes_per_pack 0)
# concatenates every gradient into one buffer, so nothing is sent before the whole buffer is built; NCCL's
# bandwidth on large messages is reached well below 32 MiB (PyTorch DDP's buckets: 25 MiB).
BYTES_PER_PACK = 32 * 2**20
# The dtype gradients travel in, by training precision. bf16 halves the bytes; its 8-bit significand rounds
# each value and each partial sum to within 2^-8 relative, so a sum over N replicas is within N x 2^-8 of the
# summed magnitudes (``engines_test``, N = 2); AdamW divides by the gradient's own RMS, so an update moves by a
# relative error of that size. fp16 scales its loss (gradients up to 2^15 x): its gradients stay float32.
REDUCE_DTYPES = {"bf16": tf.bfloat16, "fp16": tf.float32, "fp32": tf.float32}


class StrategyEngine:
    """A tf.distribute strategy; ``worker`` / ``workers`` count processes (hosts), not devices.

    Gradients are summed in packs of BYTES_PER_PACK, in ``reduce_dtype``. TensorFlow 2.21 launches the packs
    in reverse variable order (the last layers', whose gradients a backward pass computes first, before the
    first layers'), one collective after the other; a pack starts when its gradients exist. They all exist at
    once here: the step's gradients are the sum over its micro-batches (``Trainer``), so the reduction follows
    the whole backward pass and overlaps only its own packs' concatenation and copies.

    Args:
        strategy: the strategy; create it first thing in the process (MultiWorkerMirroredStrategy needs that).
        name: "default", "mirrored" or "multi_worker" (for logs).
        worker: this process's index among the workers.
        workers: number of worker processes.
        reduce_dtype: the dtype gradients are summed in (``REDUCE_DTYPES``); the sums come back as float32.
    """

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        name: str,
        worker: int = 0,
        workers: int = 1,
        reduce_dtype: tf.DType = tf.float32,
    ):
        self.strategy, self.name, self.worker, self.workers = strategy, name, worker, workers
        self.reduce_dtype = reduce_dtype
        self._any_flag = None

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
        options = tf.distribute.experimental.CommunicationOptions(bytes_per_pack=BYTES_PER_PACK)
        sent = [tf.cast(g, self.reduce_dtype) for g in grads]
        summed = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, sent, options=options)
        return [tf.cast(g, tf.float32) for g in summed]

    def sum_over_replicas(self, value):
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, value)

    def local(self, value):
        """One replica's copy of a value that all-reduction made identical on every replica."""
        return self.strategy.experimental_local_results(value)[0]

    def after_first_step(self, variables: list) -> None:
        """Nothing to do: the strategy created every variable with the chief's initial value."""

    def any_worker(self, flag: bool) -> bool:
        """Whether any worker passed True: a one-number all-reduce that every worker must call at the same point."""
        if self.workers == 1:
            return flag
        if self._any_flag is None:

            @tf.function
            def any_flag(flags):
                # tf.identity: MultiWorkerMirroredStrategy cannot all-reduce a distributed input as it is.
                return self.local(self.run(lambda f: self.sum_over_replicas(tf.identity(f)), (flags,)))

            self._any_flag = any_flag
        with self.scope():
            return float(self._any_flag(tf.fill([self.local_replicas], float(flag)))) > 0


class HorovodEngine:
    """One process per device (rank), gradients all-reduced by ``DistributedGradientTape``.

    The tape averages over ranks; the training step's loss is already a share of the global mean
    (sum over this rank's tokens / global tokens), so the average is multiplied back by ``size``.
    With gradient accumulation the tape all-reduces every micro-batch (more traffic than the
    strategy engine, which all-reduces once per step).

    Args:
        hvd: the imported ``horovod.tensorflow`` or ``smdistributed.dataparallel.tensorflow`` module.
        pin_gpu: make only the local rank's GPU visible (call before TensorFlow uses a GPU).
    """

    name = "horovod"

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

    def after_first_step(self, variables: list) -> None:
        """Every rank takes rank 0's values (the Horovod pattern: broadcast after the first step)."""
        self.hvd.broadcast_variables([getattr(v, "value", v) for v in variables], root_rank=0)

    def any_worker(self, flag: bool) -> bool:
        """Whether any rank passed True (an averaged all-reduce of 0/1 flags is above 0)."""
        allreduce = getattr(self.hvd, "oob_allreduce", self.hvd.allreduce)
        return float(allreduce(tf.constant(float(flag)))) > 0


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


def make_engine(
    engine: str, *, hosts: list[str], current_host: str, num_gpus: int, env=os.environ, precision: str = "fp32"
):
    """Creates the engine (gradients summed in ``REDUCE_DTYPES[precision]``); call before any other TensorFlow
    work in the process."""
    reduce_dtype = REDUCE_DTYPES[precision]
    name = choose_engine(engine, hosts=hosts, num_gpus=num_gpus, env=env)
    if name == "horovod":
        hvd = import_horovod()
        if hvd is None:
            raise RuntimeError(f"engine horovod: none of {', '.join(HOROVOD_MODULES)} imports here")
        return HorovodEngine(hvd)
    if name == "multi_worker":
        if "TF_CONFIG" not in env and len(hosts) > 1:
            env["TF_CONFIG"] = sagemaker_tf_config(hosts, current_host)
        if "TF_CONFIG" in env:
            os.environ["TF_CONFIG"] = env["TF_CONFIG"]  # the strategy's cluster resolver reads os.environ
        implementation = (
            tf.distribute.experimental.CommunicationImplementation.NCCL
            if tf.config.list_physical_devices("GPU")
            else tf.distribute.experimental.CommunicationImplementation.RING
        )
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation)
        )
        return StrategyEngine(strategy, name, *worker_position(strategy.cluster_resolver), reduce_dtype)
    if name == "mirrored":
        return StrategyEngine(tf.distribute.MirroredStrategy(), name, reduce_dtype=reduce_dtype)
    return StrategyEngine(tf.distribute.get_strategy(), "default")


class PipelineEngine:
    """Data parallelism over pipeline replicas: each replica is K devices of this process, one per stage.

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
        self._any_flag = None

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

    def any_worker(self, flag: bool) -> bool:
        """Whether any worker passed True: a one-number all-reduce on stage 0's devices, called by every worker."""
        if self.workers == 1:
            return flag
        if self._any_flag is None:
            self._any_flag = tf.function(lambda value: self.all_reduce([value] * self.local_replicas, 0, "any")[0])
        return float(self._any_flag(tf.constant(float(flag)))) > 0

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
    engine: str, *, model_parallel_degree: int, hosts: list[str], current_host: str, num_gpus: int, env=os.environ
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
    if "TF_CONFIG" not in env and len(hosts) > 1:
        env["TF_CONFIG"] = sagemaker_tf_config(hosts, current_host)
    if "TF_CONFIG" in env:
        os.environ["TF_CONFIG"] = env["TF_CONFIG"]
    implementation = getattr(tf.distribute.experimental.CommunicationImplementation, communication.upper())
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation)
    )
    worker, workers = worker_position(strategy.cluster_resolver)
    return PipelineEngine(
        replica_devices, worker=worker, workers=workers, communication=communication, strategy=strategy
    )
