"""The JSON a user starts an execution with, merged with the stage's defaults and validated.

Minimal input (everything else comes from the stage's configuration)::

    {"corpus": {"s3_uri": "s3://my-raw-bucket/pile/"}}

Every field that the stage configuration has under ``preprocessing``, ``training`` and ``deploy`` can be
given, plus the workflow's own ``corpus``, ``dataset``, ``run_name``, ``hyperparameters`` and
``force_preprocess``. A bad value fails the Plan step with the same message synthesis would give,
naming the field: ``training.instance_count: 0 is not valid; expected a positive integer``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from infra.aws_limits import aws_limits
from infra.config import (
    ConfigError,
    DeployConfig,
    PreprocessingConfig,
    StageConfig,
    TrainingConfig,
    build_dataclass,
    check_fit,
    deep_merge,
    validate,
)
from infra.training_code import training_module

CORPUS_SUFFIXES = training_module("formats").SUFFIXES  # what preprocessing reads (training/contract/formats.py)
FIELD_NAME = r"[^\x00-\x1f\x7f]{1,128}"  # a JSON key or Parquet column: printable, one container argument
RUN_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}"  # a folder of the checkpoints bucket, never "." or ".."
SIZE = training_module("sizes").SIZE  # bytes, binary multiples: 6M, 1.5G, 2GiB (training/contract/sizes.py)
# Each Pile subset name goes to the processing jobs as a container argument of its own, PILE_SET_OPTION + name, at
# most aws_limits().container_argument_chars long; of SageMaker's 100 arguments a job, the jobs' own take 17.
PILE_SET_OPTION = "--pile_set_names="
MAX_PILE_SET_NAMES = 64


@dataclasses.dataclass(frozen=True)
class CorpusInput:
    """Where the raw text is.

    Args:
        s3_uri: a prefix holding files of the formats in ``training/contract/formats.py`` (``.jsonl.zst``,
            ``.jsonl.zstd``, ``.json.gz``, ``.parquet`` ...; default: the raw bucket's root).
        pile_set_names: keep only these ``meta.pile_set_name`` values, comma-separated (empty keeps all).
        text_field: the JSON field or Parquet column that holds each document's text.
        tokenizer_sample_files: input files, spread over the corpus, that the tokenizer job reads.
        tokenizer_sample_bytes: text the tokenizer trains on, e.g. ``1G``.
    """

    s3_uri: str | None = None
    pile_set_names: str = ""
    text_field: str = "text"
    tokenizer_sample_files: int = 2
    tokenizer_sample_bytes: str = "1G"

    def pile_sets(self) -> list[str]:
        """``pile_set_names`` as a list, in order, blanks dropped."""
        return [name.strip() for name in self.pile_set_names.split(",") if name.strip()]


@dataclasses.dataclass(frozen=True)
class DatasetInput:
    """The tokenized dataset preprocessing writes (or that already exists under this name).

    Args:
        name: folder name of the dataset in the datasets bucket and on EFS.
        tokenizer_s3_uri: an existing ``tokenizer.json`` to use instead of training one.
    """

    name: str = "pile"
    tokenizer_s3_uri: str | None = None


@dataclasses.dataclass(frozen=True)
class WorkflowInput:
    """One execution's input after defaults are applied.

    Args:
        run_name: names the checkpoint folder; start a new execution with the same run_name to resume
            a run from its last checkpoint (default: the execution's name).
        hyperparameters: extra ``train.py`` hyperparameters, e.g. ``{"learning_rate": 3e-4}``, checked against
            train.py's own schema (``training/contract/hparams.py``): names, types and ranges.
        force_preprocess: preprocess even when the dataset's manifest already exists.
    """

    corpus: CorpusInput = CorpusInput()
    dataset: DatasetInput = DatasetInput()
    preprocessing: PreprocessingConfig = dataclasses.field(default_factory=PreprocessingConfig)
    training: TrainingConfig = dataclasses.field(default_factory=TrainingConfig)
    deploy: DeployConfig = dataclasses.field(default_factory=DeployConfig)
    run_name: str | None = None
    hyperparameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    force_preprocess: bool = False

    @property
    def vocab_size(self) -> int:
        """The model's embedding rows: ``hyperparameters.vocab_size`` (larger than the tokenizer's pads), else
        ``preprocessing.vocab_size``."""
        given = training_module("hparams").check_hyperparameters(self.hyperparameters).get("vocab_size", 0)
        return given or self.preprocessing.vocab_size


def parse_input(raw: Any, stage: StageConfig) -> WorkflowInput:
    """Merges ``raw`` over the stage's defaults and validates the result; raises ConfigError."""
    if not isinstance(raw, dict):
        raise ConfigError("input", raw, "a JSON object")
    raw = dict(raw)
    if isinstance(raw.get("deploy"), bool):  # {"deploy": true} is short for {"deploy": {"enabled": true}}
        raw["deploy"] = {"enabled": raw["deploy"]}
    defaults = {name: dataclasses.asdict(getattr(stage, name)) for name in ("preprocessing", "training", "deploy")}
    parsed = build_dataclass(WorkflowInput, deep_merge(defaults, raw), "")
    _validate_workflow_fields(parsed)  # before the estimate's checks, which need every field valid
    validate(
        dataclasses.replace(stage, preprocessing=parsed.preprocessing, training=parsed.training, deploy=parsed.deploy)
    )
    if parsed.vocab_size != parsed.preprocessing.vocab_size:  # the model the job builds, not the tokenizer's
        _check_model_vocabulary(parsed)
    for field in ("image_uri", "image_forwards_signals"):  # the stack, not an execution, chooses the code
        if getattr(parsed.training, field) != getattr(stage.training, field):
            given, value = getattr(parsed.training, field), getattr(stage.training, field)
            raise ConfigError(f"training.{field}", given, f"the stage's ({value}): set it there")
    return parsed


def _check_model_vocabulary(parsed: WorkflowInput) -> None:
    """A ``hyperparameters.vocab_size`` holds the tokenizer's ids and goes through the same fit as training.*."""
    if parsed.vocab_size < parsed.preprocessing.vocab_size and parsed.dataset.tokenizer_s3_uri is None:
        raise ConfigError(
            "hyperparameters.vocab_size",
            parsed.vocab_size,
            f"0 or at least the tokenizer's preprocessing.vocab_size ({parsed.preprocessing.vocab_size:,})",
        )
    try:
        check_fit(parsed.training, parsed.vocab_size)
    except ConfigError as error:
        problem = str(error).split(": ", 1)[1]
        raise ConfigError.sentence("hyperparameters.vocab_size", f"{parsed.vocab_size:,} rows: {problem}") from error


def _validate_workflow_fields(parsed: WorkflowInput) -> None:
    for field, uri in (
        ("corpus.s3_uri", parsed.corpus.s3_uri),
        ("dataset.tokenizer_s3_uri", parsed.dataset.tokenizer_s3_uri),
    ):
        if uri is not None and not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?", uri):
            raise ConfigError(field, uri, "an s3://bucket/prefix URI")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", parsed.dataset.name):
        raise ConfigError("dataset.name", parsed.dataset.name, "letters, digits, '.', '_' or '-', at most 64")
    if parsed.run_name is not None and not re.fullmatch(RUN_NAME, parsed.run_name):
        raise ConfigError("run_name", parsed.run_name, "letters, digits, '.', '_' or '-', at most 80")
    longest = aws_limits().container_argument_chars - len(PILE_SET_OPTION)
    for name in parsed.corpus.pile_sets():
        if len(name) > longest:
            expected = f"names of at most {longest} characters (SageMaker's limit)"
            raise ConfigError("corpus.pile_set_names", name, expected)
    if len(parsed.corpus.pile_sets()) > MAX_PILE_SET_NAMES:
        raise ConfigError(
            "corpus.pile_set_names", parsed.corpus.pile_set_names, f"at most {MAX_PILE_SET_NAMES} comma-separated names"
        )
    if not re.fullmatch(FIELD_NAME, parsed.corpus.text_field):
        expected = "a field name of 1 to 128 printable characters"
        raise ConfigError("corpus.text_field", parsed.corpus.text_field, expected)
    if parsed.corpus.tokenizer_sample_files <= 0:
        raise ConfigError("corpus.tokenizer_sample_files", parsed.corpus.tokenizer_sample_files, "a positive integer")
    if not re.fullmatch(SIZE, parsed.corpus.tokenizer_sample_bytes):  # as preprocess.py's parse_size reads it
        raise ConfigError(
            "corpus.tokenizer_sample_bytes", parsed.corpus.tokenizer_sample_bytes, "a size like 500M, 1.5G or 2GiB"
        )
    hparams = training_module("hparams")  # the names the workflow sets: plan.check_hyperparameters
    try:
        hparams.check_hyperparameters(parsed.hyperparameters)
    except hparams.HyperparameterError as error:
        raise ConfigError(f"hyperparameters.{error.name}", error.value, error.expected) from error
