"""How a run spreads over devices: what differs between data-parallel and pipelined training, in one place.

``DataParallel``: one ``GPT`` per replica under a distribution strategy, trained by ``Trainer``.
``Pipelined`` (``model_parallel_degree`` > 1): a ``PipelinedGPT`` per local pipeline replica, its blocks in
stages over that many devices, trained by ``PipelineTrainer``. ``for_run(args)`` chooses; ``TrainingRun``
asks it for the engine, the accumulation steps, the model and trainer, and the export device.
"""

from __future__ import annotations

import contextlib

import keras
import tensorflow as tf
from contract.batch import pipeline_microbatches
from gpt.model import GPT
from gpt.pipeline.model import PipelinedGPT

from run.engines import DataParallelEngine, Engine, make_engine
from run.job import JobError
from run.pipeline_trainer import PipelineEngine, PipelineTrainer, build_pipeline_replicas, make_pipeline_engine
from run.trainer import Trainer, make_optimizer


def optimizer_arguments(args) -> dict:
    return {"weight_decay": args.weight_decay, "beta_1": args.adam_beta1, "beta_2": args.adam_beta2}


def use_xla(setting: str | bool) -> bool:
    """The ``use_xla`` hyperparameter: as given, or (auto) on where TensorFlow sees a GPU. Recomputation survives
    XLA (``gpt.layers.recompute_grad``); a pipeline turns auto off (``Pipelined``)."""
    if setting != "auto":
        return bool(setting)
    return bool(tf.config.list_physical_devices("GPU"))


def name_the_compiled_step(trainer: Trainer) -> None:
    """Traces the step before a checkpoint is restored, so that its compiled micro-step has the same name in a
    resumed run as in the first: TensorFlow names a traced function after a process-wide counter
    (``__inference__micro_grads_fn_1454``), XLA's persistent cache keys an entry by that name
    (``run/compile_cache.py``), and a restore advances the counter (its own functions), which the first run's
    first step did not see: traced after the restore, a resumed run's micro-step was ``..._1652`` and compiled
    again. Traced here, the step's name depends only on what every run does before it."""
    trainer.trace()


class DataParallel:
    """Args: the parsed hyperparameters."""

    def __init__(self, args) -> None:
        self.args = args

    def make_engine(self, hosts: list[str], current_host: str, num_gpus: int, env) -> Engine:
        a = self.args
        return make_engine(a.engine, hosts=hosts, current_host=current_host, num_gpus=num_gpus, env=env)

    def accumulation_steps(self, steps: int) -> int:
        """The accumulation steps of a training step, from those the global batch asks for."""
        return steps

    def build(
        self, engine: DataParallelEngine, schedule, model_arguments: dict, **trainer_arguments
    ) -> tuple[keras.Model, Trainer]:
        """The model (the chief replica's) and its trainer; ``trainer_arguments`` are the ones both trainers take."""
        with engine.scope():
            model = GPT(**model_arguments)
            optimizer = make_optimizer(model, schedule, **optimizer_arguments(self.args))
        xla = use_xla(self.args.use_xla)
        trainer = Trainer(model, optimizer, engine, use_xla=xla, **trainer_arguments)
        if xla:
            name_the_compiled_step(trainer)
        return model, trainer

    def describe(self, model: keras.Model, trainer: Trainer) -> str:
        """What the ``[config]`` line adds."""
        return ""

    def export_device(self) -> contextlib.AbstractContextManager:
        """Where the single-device float32 copy for export is made."""
        return contextlib.nullcontext()


class Pipelined(DataParallel):
    def make_engine(self, hosts: list[str], current_host: str, num_gpus: int, env) -> PipelineEngine:
        a = self.args
        if a.use_xla is True:  # auto: off for a pipeline
            raise JobError(
                "use_xla with model_parallel_degree > 1: XLA compiles a function for one device, a pipeline "
                "step spans several"
            )
        return make_pipeline_engine(
            a.engine,
            model_parallel_degree=a.model_parallel_degree,
            hosts=hosts,
            current_host=current_host,
            num_gpus=num_gpus,
            env=env,
        )

    def accumulation_steps(self, steps: int) -> int:
        """With no global batch set, one GPipe pass of ``microbatches`` micro-batches a step; raises BatchError."""
        a = self.args
        if a.global_batch_tokens <= 0 and a.microbatches > 0:
            steps = a.microbatches
        pipeline_microbatches(steps, a.microbatches)
        return steps

    def build(
        self, engine: PipelineEngine, schedule, model_arguments: dict, **trainer_arguments
    ) -> tuple[keras.Model, Trainer]:
        """One PipelinedGPT and AdamW per local pipeline replica; the chief replica's state is broadcast."""

        def build(devices):
            return PipelinedGPT(devices=devices, **model_arguments)

        models, optimizers = build_pipeline_replicas(engine, build, schedule, **optimizer_arguments(self.args))
        trainer = PipelineTrainer(models, optimizers, engine, microbatches=self.args.microbatches, **trainer_arguments)
        return models[0], trainer

    def describe(self, model: keras.Model, trainer: Trainer) -> str:
        return (
            f" model_parallel_degree={self.args.model_parallel_degree} microbatches={trainer.microbatches} "
            f"stages={[len(blocks) for blocks in model.stage_blocks]}"
        )

    def export_device(self) -> contextlib.AbstractContextManager:
        return tf.device("/CPU:0")  # a pipelined model may not fit one accelerator: its copy is made in host memory


def for_run(args) -> DataParallel:
    """Pipelined when ``model_parallel_degree`` > 1, else data parallel."""
    return Pipelined(args) if args.model_parallel_degree > 1 else DataParallel(args)
