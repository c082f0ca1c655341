"""The training job's hyperparameters: what the workflow derives, what the execution may give, their encoding and
the one check of them all, as train.py and SageMaker take them.

The request's ``HyperParameters`` are the planned defaults (``checkpoint_every``), under the execution's
``hyperparameters``, under the workflow's own (``workflow_hyperparameters``), JSON-encoded (``encode``).
"""

from __future__ import annotations

import json
from typing import Any

from infra.aws_limits import aws_limits
from infra.estimate import checkpoint
from infra.estimate.estimate import estimate_for_config
from infra.instances import INSTANCE_TYPES
from infra.plan_step.execution_input import InputError, WorkflowInput
from infra.plan_step.settings import StackSettings
from infra.training_code import recipe_for, training_module

CHECKPOINT_DIR = "/opt/ml/checkpoints"
TENSORBOARD_DIR = "/opt/ml/output/tensorboard"  # TensorBoardOutputConfig's LocalPath (and its default)
# The training package's entry points (at the root of sourcedir.tar.gz), by job kind.
ENTRY_POINTS = {"train": "train.py", "preprocess": "preprocess.py"}


def encode(values: dict[str, Any]) -> dict[str, str]:
    """SageMaker's encoding: every value JSON-encoded to a string (so strings carry their quotes)."""
    return {name: json.dumps(value) for name, value in values.items()}


def planned_checkpoint_every(train: Any, vocab_size: int) -> dict[str, int]:
    """On GPU instances, the ``checkpoint_every`` that bounds a spot reclaim's loss to 5% of an hour of training
    (``infra/estimate/checkpoint.py``); on CPU instances (local runs) train.py's own default."""
    if not INSTANCE_TYPES[train.instance_type].is_gpu:
        return {}
    fit = estimate_for_config(train, vocab_size)
    return {
        "checkpoint_every": checkpoint.checkpoint_every_for(
            fit, checkpoint.checkpoint_save(fit), checkpoint.LOST_SHARE_OF_HOUR
        )
    }


def workflow_hyperparameters(settings: StackSettings, inp: WorkflowInput) -> dict[str, Any]:
    """The hyperparameters the workflow itself sets, from the input's ``training.*`` fields, the stage's
    observability and SageMaker's paths: the names an execution's ``hyperparameters`` may not give
    (``check_hyperparameters``)."""
    train = inp.training
    instance = INSTANCE_TYPES[train.instance_type]
    observability = settings.stage_config.observability
    shape = train.shape
    values: dict[str, Any] = {
        "model_preset": train.model_preset,
        "n_layer": shape.n_layer,
        "d_model": shape.d_model,
        "n_head": shape.n_head,
        "sequence_length": train.sequence_length,
        "global_batch_tokens": train.global_batch_tokens,
        "micro_batch_size": train.micro_batch_size,
        "max_steps": training_module("batch").optimizer_steps(train.train_tokens, train.global_batch_tokens),
        "precision": train.precision,
        # as given, or (unset) the least that fits: a mode name, as train.py reads it
        "recompute": training_module("hparams").recompute_mode(
            estimate_for_config(train, inp.vocab_size).inputs.recompute
        ),
        "hf_checkpoint": train.hf_checkpoint,
        "model_parallel_degree": train.model_parallel_degree,
        "microbatches": train.microbatches,
        "checkpoint_dir": CHECKPOINT_DIR,
        "tensorboard_dir": TENSORBOARD_DIR,
        "profile_start": observability.profile_start,
        "profile_steps": observability.profile_steps,
        "health_rules": json.dumps(observability.health_rules(), separators=(",", ":")),
        "sagemaker_program": ENTRY_POINTS["train"],
        "sagemaker_submit_directory": settings.source_dir_uri,
        "sagemaker_region": settings.region,
        "sagemaker_container_log_level": 20,
        "model_dir": "/opt/ml/model",
    }
    if inp.corpus.sources:  # the mix's weights, as corpus.sources gives them
        values["source_weights"] = inp.corpus.source_weights()
    if train.data_parallel_engine == "mpi":  # Horovod API: one process per GPU, started by mpirun
        values.update(
            engine="horovod",
            sagemaker_mpi_enabled=True,
            sagemaker_mpi_num_of_processes_per_host=max(instance.gpus, 1),
            # mpirun passes only what -x names to the other hosts' processes: NCCL's log settings for the rule.
            sagemaker_mpi_custom_mpi_options=" ".join(f"-x {k}={v}" for k, v in _nccl_log_settings().items()),
        )
    else:  # tf.distribute.MultiWorkerMirroredStrategy: the toolkit writes TF_CONFIG on every host
        values.update(engine="multi_worker", sagemaker_multi_worker_mirrored_strategy_enabled=True)
    return values


def training_hyperparameters(settings: StackSettings, inp: WorkflowInput) -> dict[str, str]:
    """The request's ``HyperParameters``: the execution's own over the planned defaults (``checkpoint_every``), and
    the workflow's over both, JSON-encoded as the SageMaker SDK does."""
    defaults = planned_checkpoint_every(inp.training, inp.vocab_size)
    return encode({**defaults, **inp.hyperparameters, **workflow_hyperparameters(settings, inp)})


def _nccl_log_settings() -> dict[str, str]:
    return {k: v for k, v in training_module("network").nccl_environment("").items() if k.startswith("NCCL_DEBUG")}


def check_hyperparameters(settings: StackSettings, inp: WorkflowInput) -> Any:
    """Every hyperparameter the job would get, given or derived, as train.py and SageMaker would take it; returns
    the ``contract/recipe.py`` ``Recipe`` they make. The input may not give what the workflow sets
    (``workflow_hyperparameters``), a path in the container, or one of SageMaker's own names."""
    limits, hparams = aws_limits(), training_module("hparams")
    owned = workflow_hyperparameters(settings, inp)
    for name, value in inp.hyperparameters.items():
        if name in hparams.PATHS or hparams.is_reserved(name):
            expected = "no such hyperparameter: SageMaker and the workflow choose the job's paths and SageMaker's own"
            raise InputError(f"hyperparameters.{name}: {hparams.shown(value)} is not valid; expected {expected}")
        if name in owned or name == "source_weights":  # without a mix train.py finds no source to weigh
            instead = (
                "corpus.sources' weights"
                if name == "source_weights"
                else "the training.* field or the stage's observability.*"
            )
            expected = f"{instead} instead (the workflow sets it)"
            raise InputError(f"hyperparameters.{name}: {hparams.shown(value)} is not valid; expected {expected}")
    encoded = training_hyperparameters(settings, inp)
    if len(encoded) > limits.hyperparameters:
        raise InputError(
            f"hyperparameters: {len(encoded)} in all with the workflow's own; SageMaker takes at most "
            f"{limits.hyperparameters} (HyperParameters)"
        )
    for name, text in encoded.items():
        field = (
            f"hyperparameters.{name}" if name in inp.hyperparameters else f"training (derived hyperparameter {name})"
        )
        if len(name) > limits.hyperparameter_key_chars:
            raise InputError(
                f"{field}: the name is longer than SageMaker's {limits.hyperparameter_key_chars} characters"
            )
        if len(text) > limits.hyperparameter_value_chars:
            raise InputError(
                f"{field}: {len(text):,} characters encoded; SageMaker takes at most "
                f"{limits.hyperparameter_value_chars:,} (HyperParameterValue)"
            )
        if name in inp.hyperparameters:
            continue  # parse_input checked the execution's own against the schema
        try:
            hparams.check_hyperparameters({name: json.loads(text)})
        except hparams.HyperparameterError as error:
            raise InputError(
                f"{field}: {hparams.shown(error.value)} is not valid; expected {error.expected}"
            ) from error
    train = inp.training
    try:  # the schedule the hyperparameters make: a warm-up as long as the run is refused
        return recipe_for(train.model_preset, train.global_batch_tokens, train.train_tokens, inp.hyperparameters)
    except training_module("recipe").RecipeError as error:
        raise InputError(f"hyperparameters.{error}") from error
