"""preprocess.py's options: the one table (``options``) its parser is built from and the Plan step writes the
processing jobs' container arguments with (``container_arguments``).

Each option has its name, the modes that read it, its default, its help and its value check. Every option is
accepted by both modes (container arguments are easier to assemble that way); ``container_arguments`` refuses one
its mode does not read. A repeatable option goes one argument a value (``--pile_set_names=Gutenberg (PG-19)``),
as SageMaker caps a container argument at 256 characters; the others as ``--name value``.

Standard library only: infra loads this file (``infra/training_code.py``). The contract's modules import each
other not at all, so the three the table reads (``formats``, ``hparams``, ``sizes``) are ``options``'s arguments.

Example::

    >>> from contract import formats, hparams, sizes
    >>> table = options(formats, hparams, sizes)
    >>> container_arguments(table, "tokenizer", {"vocab_size": 50257, "source": [("web", 0.7)]})
    ['tokenizer', '--vocab_size', '50257', '--source=web:0.7']
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

MODES = ("tokenizer", "shards")
BOTH = MODES


def host_name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._]+(-[A-Za-z0-9._]+)*", text):
        raise argparse.ArgumentTypeError(f"host must be letters, digits, '.', '_' and single '-': {text!r}")
    return text


# The rules of names, in words: what a check below raises (the Plan step's ``expected``; the job's message).
SUBSET_NAME_RULE = "a Pile subset name of printable ASCII, as the Pile's are (Pile-CC, Github, Gutenberg (PG-19) ...)"
FIELD_NAME_RULE = "a field name of 1 to 128 printable characters, not starting with '-'"


def subset_name(text: str) -> str:
    """A ``meta.pile_set_name`` to keep: printable ASCII, as every Pile subset's name is (a Cyrillic look-alike
    of "Github" would select nothing, silently)."""
    if not text or not text.isascii() or not text.isprintable():
        raise argparse.ArgumentTypeError(SUBSET_NAME_RULE)
    return text


def name_list(text: str) -> frozenset[str]:
    """A comma list of subset names (``subset_name`` each), blanks dropped."""
    return frozenset(subset_name(name.strip()) for name in text.split(",") if name.strip())


class AddNames(argparse.Action):
    """A comma list of names (``name_list``), added to those of the option's earlier uses."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, getattr(namespace, self.dest) | values)


def field_name(text: str) -> str:
    """A JSON field or Parquet column: one container argument that cannot read as an option (``--mode=tokenizer``)
    and holds no control or invisible character (``te\u200bxt`` is not ``text``)."""
    if not text or len(text) > 128 or not text.isprintable() or text.startswith("-"):
        raise argparse.ArgumentTypeError(FIELD_NAME_RULE)
    return text


def fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1): {text}")
    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def _name_and_value(text: str, value: str) -> tuple[str, str]:
    name, colon, rest = text.partition(":")
    if not colon or not rest.strip():
        raise argparse.ArgumentTypeError(f"give NAME:{value}, not {text!r}")
    return name, rest


def source_text_field(text: str) -> tuple[str, str]:
    """``--source_text_field=NAME:FIELD``."""
    name, field = _name_and_value(text, "FIELD")
    return name, field_name(field)


def source_pile_set_name(text: str) -> tuple[str, str]:
    """``--source_pile_set_names=NAME:SUBSET``, one Pile subset name (spaces allowed)."""
    name, subset = _name_and_value(text, "SUBSET")
    return name, subset_name(subset.strip())


def source_weight_check(is_source_name: Callable[[str], bool], rule: str) -> Callable[[str], tuple[str, float]]:
    """The check of ``--source=NAME:WEIGHT``, source names by ``hparams.is_source_name`` (described by ``rule``)."""

    def source_weight(text: str) -> tuple[str, float]:
        name, weight = _name_and_value(text, "WEIGHT")
        if not is_source_name(name):
            raise argparse.ArgumentTypeError(f"source name {name!r}: use a name {rule}")
        try:
            value = float(weight)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"weight {weight!r} of {name}: give a positive finite number")
        return name, value

    return source_weight


@dataclasses.dataclass(frozen=True)
class Option:
    """One option of preprocess.py.

    Args:
        name: ``--name`` on the command line, ``args.name`` after it.
        modes: the modes that read it.
        check: a text to its value (argparse's ``type``); raises ``argparse.ArgumentTypeError`` or ValueError.
        default: its value when not given (a repeatable option's values: the empty list or set).
        help: one line of ``--help``.
        action: ``"append"`` or ``AddNames`` for a repeatable option, given one value an argument.
    """

    name: str
    modes: tuple[str, ...]
    check: Callable[[str], Any]
    default: Any = None
    help: str | None = None
    action: str | type[argparse.Action] | None = None

    @property
    def prefix(self) -> str:
        """What each argument of a repeatable option starts with: ``--name=``."""
        return f"--{self.name}="

    def arguments(self, value: Any) -> list[str]:
        """``value`` as container arguments, checked: ``["--name", text]``, or ``[prefix + text]`` a repeatable
        option's value; a tuple value joined with ':' (``("web", 0.7)`` -> ``web:0.7``)."""
        text = ":".join(map(str, value)) if isinstance(value, tuple) else str(value)
        try:
            self.check(text)
        except (argparse.ArgumentTypeError, ValueError) as error:
            raise ValueError(f"--{self.name} {text!r}: {error}") from error
        return [self.prefix + text] if self.action else [f"--{self.name}", text]


def options(formats: ModuleType, hparams: ModuleType, sizes: ModuleType) -> dict[str, Option]:
    """The table, by name, in ``--help``'s order; ``formats``, ``hparams`` and ``sizes`` are those contract modules."""
    rows = (
        Option("input_dir", BOTH, Path, Path("/opt/ml/processing/input/raw"),
               f"raw {', '.join(formats.SUFFIXES)} files, searched recursively"),
        Option("text_field", BOTH, field_name, formats.DEFAULT_TEXT_FIELD,
               "the JSON field or Parquet column holding a document's text"),
        Option("tokenizer_dir", ("shards",), Path, Path("/opt/ml/processing/input/tokenizer"),
               "shards: folder holding tokenizer.json (or the file itself)"),
        Option("output_dir", BOTH, Path, Path("/opt/ml/processing/output/dataset")),
        Option("vocab_size", ("tokenizer",), positive_int, 50257, "tokenizer: vocabulary size"),
        Option("sample_bytes", ("tokenizer",), sizes.parse_amount, sizes.parse_amount("1G"),
               "tokenizer: bytes of text to train on, spread over all inputs (e.g. 1G, 500M, 2GiB: contract/sizes.py)"),
        Option("sequence_length", ("shards",), positive_int, 2048,
               "shards: the model's context; records hold sequence_length + 1 tokens"),
        Option("shard_size_mb", ("shards",), float, 1024.0, "shards: about this many MiB a shard"),
        Option("validation_fraction", ("shards",), fraction, 0.0005,
               "shards: share of documents for validation (chosen by a hash of input and position)"),
        Option("pile_set_names", BOTH, name_list, frozenset(),
               "comma-separated meta.pile_set_name values to keep, the option repeatable; none keeps all", AddNames),
        Option("source", BOTH, source_weight_check(hparams.is_source_name, hparams.SOURCE_NAME_RULE), [],
               "NAME:WEIGHT, repeatable: a mix, each source read from <input_dir>/<NAME>/ (nothing else read)",
               "append"),
        Option("source_text_field", BOTH, source_text_field, [],
               "NAME:FIELD: that source's text field or column (default: --text_field)", "append"),
        Option("source_pile_set_names", BOTH, source_pile_set_name, [],
               "NAME:SUBSET, repeatable, one meta.pile_set_name a use: that source's subsets to keep; none keeps all",
               "append"),
        Option("workers", ("shards",), int, 0, "shards: encoding processes; 0 = every core"),
        Option("host", ("shards",), host_name, None,
               "name in shard and manifest names; default: current_host of SageMaker's resourceconfig"),
        Option("progress_seconds", BOTH, float, 30.0, "seconds between progress lines"),
    )  # fmt: skip
    return {row.name: row for row in rows}


def add_options(parser: argparse.ArgumentParser, table: Mapping[str, Option]) -> None:
    """Every option of ``table`` on ``parser`` (an ``"append"`` option's default: a fresh empty list)."""
    for o in table.values():
        default = list(o.default) if o.action == "append" else o.default
        parser.add_argument(f"--{o.name}", type=o.check, default=default, help=o.help, action=o.action)


def container_arguments(table: Mapping[str, Option], mode: str, values: Mapping[str, Any]) -> list[str]:
    """``mode`` then each of ``values`` (name -> value, or a repeatable option's list of values) as container
    arguments, in order; ValueError for an unknown mode, an unknown option, one ``mode`` does not read, or a value
    its check refuses."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
    arguments = [mode]
    for name, value in values.items():
        if name not in table:
            raise ValueError(f"--{name}: preprocess.py has no such option")
        option = table[name]
        if mode not in option.modes:
            raise ValueError(f"--{name}: preprocess.py {mode} does not read it")
        for one in value if option.action else [value]:
            arguments += option.arguments(one)
    return arguments
