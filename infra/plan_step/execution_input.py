"""The JSON a user starts an execution with, merged with the stage's defaults and validated.

Minimal input (everything else comes from the stage's configuration)::

    {"corpus": {"s3_uri": "s3://my-raw-bucket/pile/"}}

Every field that the stage configuration has under ``preprocessing``, ``training`` and ``deploy`` can be
given, plus the workflow's own ``corpus``, ``dataset``, ``run_name``, ``hyperparameters`` and
``force_preprocess``. A bad value fails the Plan step with the same message synthesis would give,
naming the field: ``training.instance_count: 0 is not valid; expected a positive integer``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
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
from infra.training_code import preprocess_options, training_module

CORPUS_SUFFIXES = training_module("formats").SUFFIXES  # what preprocessing reads (training/contract/formats.py)
RUN_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}"  # a folder of the checkpoints bucket, never "." or ".."
S3_URI = r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?"
# Each Pile subset name goes to the processing jobs as a container argument of its own, PILE_SET_OPTION + name (a
# mix's: SOURCE_PILE_SET_OPTION + source + ":" + name), at most aws_limits().container_argument_chars long. Of
# SageMaker's 100 arguments a job, the jobs' own take at most 15 (the shards job: its mode and 7 options) and a mix's
# sources at most 2 x MAX_SOURCES = 16 (--source, --source_text_field).
PILE_SET_OPTION = preprocess_options()["pile_set_names"].prefix
SOURCE_PILE_SET_OPTION = preprocess_options()["source_pile_set_names"].prefix
MAX_PILE_SET_NAMES = 64
# A job's ProcessingInputs: the code, the tokenizer and one a source.
MAX_SOURCES = aws_limits().processing_inputs - 2
MAX_NUMBER = 10**18  # any number of the input, before arithmetic: no field needs more, 1e308 + 1e308 overflows


class InputError(Exception):
    """A bad execution input; the state machine's Catch turns it into the failure notification."""


def comma_names(text: str) -> list[str]:
    """A comma list of names, in order, blanks dropped."""
    return [name.strip() for name in text.split(",") if name.strip()]


@dataclasses.dataclass(frozen=True)
class SourceInput:
    """One source of a mix (``corpus.sources``).

    Args:
        name: the source's name in shards, metrics and reports: a-z, 0-9 and '-', at most 32 (not ``se``).
        s3_uri: its prefix, read as ``corpus.s3_uri`` is.
        weight: its share of the training sequences, over the sum of the weights (a small source repeats, a large
            one is subsampled).
        text_field: its JSON field or Parquet column (default: ``corpus.text_field``).
        pile_set_names: keep only these ``meta.pile_set_name`` values of it, comma-separated (empty keeps all).
    """

    name: str
    s3_uri: str
    weight: float = 1.0
    text_field: str | None = None
    pile_set_names: str = ""


@dataclasses.dataclass(frozen=True)
class CorpusInput:
    """Where the raw text is.

    Args:
        s3_uri: a prefix holding files of the formats in ``training/contract/formats.py`` (``.jsonl.zst``,
            ``.jsonl.zstd``, ``.json.gz``, ``.parquet`` ...; default: the raw bucket's root).
        sources: a mix instead of ``s3_uri``: several sources, each with its prefix and weight.
        pile_set_names: keep only these ``meta.pile_set_name`` values, comma-separated (empty keeps all).
        text_field: the JSON field or Parquet column that holds each document's text.
        tokenizer_sample_files: input files, spread over the corpus (over each source of a mix), that the
            tokenizer job reads.
        tokenizer_sample_bytes: text the tokenizer trains on, e.g. ``1G`` (shared by a mix's weights).
    """

    s3_uri: str | None = None
    sources: tuple[SourceInput, ...] = ()
    pile_set_names: str = ""
    text_field: str = "text"
    tokenizer_sample_files: int = 2
    tokenizer_sample_bytes: str = "1G"

    def pile_sets(self) -> list[str]:
        """``pile_set_names`` as a list, in order, blanks dropped."""
        return comma_names(self.pile_set_names)

    def text_field_of(self, source: SourceInput) -> str:
        return source.text_field or self.text_field

    def source_weights(self) -> str:
        """The ``source_weights`` hyperparameter of the mix ("" without one), e.g. ``code=0.3,web=0.7``."""
        return ",".join(f"{s.name}={s.weight!r}" for s in sorted(self.sources, key=lambda s: s.name))


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
        resume: continue the run ``run_name`` names on this execution's dataset even when it was planned with
            another (``runs.py``); a run of another shape is refused whatever this says.
    """

    corpus: CorpusInput = CorpusInput()
    dataset: DatasetInput = DatasetInput()
    preprocessing: PreprocessingConfig = dataclasses.field(default_factory=PreprocessingConfig)
    training: TrainingConfig = dataclasses.field(default_factory=TrainingConfig)
    deploy: DeployConfig = dataclasses.field(default_factory=DeployConfig)
    run_name: str | None = None
    hyperparameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    force_preprocess: bool = False
    resume: bool = False

    @property
    def vocab_size(self) -> int:
        """The model's embedding rows: ``hyperparameters.vocab_size`` (larger than the tokenizer's pads), else
        ``preprocessing.vocab_size``."""
        if "vocab_size" not in self.hyperparameters:
            return self.preprocessing.vocab_size
        given = training_module("hparams").check_hyperparameters({"vocab_size": self.hyperparameters["vocab_size"]})
        return given["vocab_size"] or self.preprocessing.vocab_size


def parse_input(raw: Any, stage: StageConfig) -> WorkflowInput:
    """Merges ``raw`` over the stage's defaults and validates the result; raises ConfigError."""
    if not isinstance(raw, dict):
        raise ConfigError("input", raw, "a JSON object")
    check_numbers(raw, "")
    raw = dict(raw)
    if isinstance(raw.get("deploy"), bool):  # {"deploy": true} is short for {"deploy": {"enabled": true}}
        raw["deploy"] = {"enabled": raw["deploy"]}
    defaults = {name: dataclasses.asdict(getattr(stage, name)) for name in ("preprocessing", "training", "deploy")}
    parsed = build_dataclass(WorkflowInput, deep_merge(defaults, raw), "")
    _validate_workflow_fields(parsed)  # before the estimate's checks, which need every field valid
    parsed = _as_folders(parsed)
    _check_evaluation(parsed)
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


def check_numbers(value: Any, field: str) -> None:
    """Raises ConfigError naming the first number of ``value`` (any depth) that is not finite or is larger in
    magnitude than ``MAX_NUMBER``: every later check and sum may then do arithmetic on it."""
    if isinstance(value, dict):
        for key, item in value.items():
            check_numbers(item, f"{field}.{key}" if field else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_numbers(item, f"{field}[{i}]")
    elif isinstance(value, int | float) and not isinstance(value, bool) and not abs(value) <= MAX_NUMBER:  # NaN too
        raise ConfigError(field, value, f"a finite number of magnitude at most {MAX_NUMBER:.0e}")


def corpus_folder(uri: str) -> str:
    """A corpus URI as the folder it names: S3 prefixes match by characters, so ``s3://raw/pile`` would also read
    ``pile-old/`` and ``pile.jsonl``; ``s3://raw/pile/`` reads only the folder."""
    return uri if uri.endswith("/") else uri + "/"


def _as_folders(parsed: WorkflowInput) -> WorkflowInput:
    """The input with each corpus URI a folder (``corpus_folder``); ConfigError for a source given twice or held in
    another's folder (its files would be read twice)."""
    corpus = parsed.corpus
    sources = tuple(dataclasses.replace(s, s3_uri=corpus_folder(s.s3_uri)) for s in corpus.sources)
    for i, source in enumerate(sources):
        for j, other in enumerate(sources[:i]):
            if source.s3_uri.startswith(other.s3_uri) or other.s3_uri.startswith(source.s3_uri):
                expected = f"a folder apart from corpus.sources[{j}]'s ({other.s3_uri}): its files would be read twice"
                raise ConfigError(f"corpus.sources[{i}].s3_uri", source.s3_uri, expected)
    uri = corpus.s3_uri and corpus_folder(corpus.s3_uri)
    return dataclasses.replace(parsed, corpus=dataclasses.replace(corpus, s3_uri=uri, sources=sources))


def _check_evaluation(parsed: WorkflowInput) -> None:
    """Evaluation (``eval_every`` > 0, train.py's default 500) reads the validation split: a fraction that picks no
    document (0, or below the 2^-64 its hash resolves, ``pile/encode.py``) fails the training job at its start."""
    hparams = training_module("hparams")
    given = hparams.check_hyperparameters(parsed.hyperparameters)
    eval_every = given.get("eval_every", hparams.BY_NAME["eval_every"].default)
    fraction = parsed.preprocessing.validation_fraction
    if eval_every > 0 and fraction * 2.0**64 < 1:
        raise ConfigError(
            "preprocessing.validation_fraction",
            fraction,
            f"a fraction of at least 2^-64 (0.0005 is usual): evaluation every {eval_every} steps "
            "(hyperparameters.eval_every) reads the validation split; or hyperparameters.eval_every 0",
        )


def _job_rule(option: str, value: str, field: str) -> None:
    """preprocess.py's own check of ``--option value`` (``training/contract/preprocess_options.py``): the job's rule
    for a name is the one the Plan step applies."""
    try:
        preprocess_options()[option].check(value)
    except (argparse.ArgumentTypeError, ValueError) as error:
        raise ConfigError(field, value, str(error)) from None


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
        if uri is not None and not re.fullmatch(S3_URI, uri):
            raise ConfigError(field, uri, "an s3://bucket/prefix URI")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", parsed.dataset.name):
        raise ConfigError("dataset.name", parsed.dataset.name, "letters, digits, '.', '_' or '-', at most 64")
    if parsed.run_name is not None and not re.fullmatch(RUN_NAME, parsed.run_name):
        raise ConfigError("run_name", parsed.run_name, "letters, digits, '.', '_' or '-', at most 80")
    longest = aws_limits().container_argument_chars - len(PILE_SET_OPTION)
    for name in parsed.corpus.pile_sets():
        _job_rule("pile_set_names", name, "corpus.pile_set_names")
        if len(name) > longest:
            expected = f"names of at most {longest} characters (SageMaker's limit)"
            raise ConfigError("corpus.pile_set_names", name, expected)
    if len(parsed.corpus.pile_sets()) > MAX_PILE_SET_NAMES:
        raise ConfigError(
            "corpus.pile_set_names", parsed.corpus.pile_set_names, f"at most {MAX_PILE_SET_NAMES} comma-separated names"
        )
    _job_rule("text_field", parsed.corpus.text_field, "corpus.text_field")
    if parsed.corpus.tokenizer_sample_files <= 0:
        raise ConfigError("corpus.tokenizer_sample_files", parsed.corpus.tokenizer_sample_files, "a positive integer")
    _job_rule("sample_bytes", parsed.corpus.tokenizer_sample_bytes, "corpus.tokenizer_sample_bytes")
    _validate_sources(parsed.corpus)
    hparams = training_module("hparams")  # the names the workflow sets: hyperparameters.check_hyperparameters
    try:
        hparams.check_hyperparameters(parsed.hyperparameters)
    except hparams.HyperparameterError as error:
        raise ConfigError(f"hyperparameters.{error.name}", error.value, error.expected) from error


def _validate_sources(corpus: CorpusInput) -> None:
    """A mix: at most ``MAX_SOURCES`` sources, each named once by the rule of ``source_weights``, a readable prefix,
    a positive finite weight whose share gets a slot of the mix's period, the job arguments within SageMaker's."""
    if not corpus.sources:
        return
    hparams = training_module("hparams")
    for field in ("s3_uri", "pile_set_names"):
        if getattr(corpus, field):
            raise ConfigError(f"corpus.{field}", getattr(corpus, field), "none with corpus.sources: each source's own")
    if len(corpus.sources) > MAX_SOURCES:
        expected = f"at most {MAX_SOURCES} sources (SageMaker's {aws_limits().processing_inputs} ProcessingInputs)"
        raise ConfigError("corpus.sources", f"{len(corpus.sources)} sources", expected)
    total = math.fsum(s.weight for s in corpus.sources if math.isfinite(s.weight) and s.weight > 0)
    names: set[str] = set()
    for i, source in enumerate(corpus.sources):
        field = f"corpus.sources[{i}]"
        if not hparams.is_source_name(source.name):
            raise ConfigError(f"{field}.name", source.name, f"a name {hparams.SOURCE_NAME_RULE}")
        if source.name in names:
            raise ConfigError(f"{field}.name", source.name, "a name no other source has")
        names.add(source.name)
        if not re.fullmatch(S3_URI, source.s3_uri):
            raise ConfigError(f"{field}.s3_uri", source.s3_uri, "an s3://bucket/prefix URI")
        if not (math.isfinite(source.weight) and source.weight > 0):
            raise ConfigError(f"{field}.weight", source.weight, "a positive finite number")
        if source.weight / total < 1 / hparams.MIX_PERIOD:
            expected = f"a share of at least 1 / {hparams.MIX_PERIOD:,} of the weights' sum ({total:g})"
            raise ConfigError(f"{field}.weight", source.weight, expected)
        if source.text_field is not None:
            _job_rule("text_field", source.text_field, f"{field}.text_field")
        longest = aws_limits().container_argument_chars - len(f"{SOURCE_PILE_SET_OPTION}{source.name}:")
        for name in comma_names(source.pile_set_names):
            _job_rule("pile_set_names", name, f"{field}.pile_set_names")
            if len(name) > longest:
                expected = f"names of at most {longest} characters (SageMaker's limit)"
                raise ConfigError(f"{field}.pile_set_names", name, expected)
    pile_sets = sum(len(comma_names(s.pile_set_names)) for s in corpus.sources)
    if pile_sets > MAX_PILE_SET_NAMES:
        raise ConfigError("corpus.sources", f"{pile_sets} pile_set_names", f"at most {MAX_PILE_SET_NAMES} in all")
