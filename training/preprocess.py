"""Entry point of the preprocessing Processing jobs: raw Pile-format text to a tokenizer and token shards.

    python preprocess.py tokenizer [--input_dir ...] [--output_dir ...] [--vocab_size 50257] [--sample_bytes 1G]
    python preprocess.py shards [--input_dir ...] [--tokenizer_dir ...] [--output_dir ...] [--sequence_length 2048]
    python preprocess.py MODE --source=web:0.7 --source=code:0.3 [--source_text_field=code:content] ...  (a mix)

Every option has a default that matches the SageMaker Processing paths; every option is accepted by both modes
(container arguments are easier to assemble that way), each mode reads the ones it needs. See PREPROCESSING.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import sys
import time
from pathlib import Path

from contract.formats import DEFAULT_TEXT_FIELD, SUFFIXES
from contract.hparams import SOURCE_NAME_RULE, is_source_name
from contract.sizes import parse_size
from pile.inputs import InputError, Source
from pile.shards_job import ShardsConfig, run_shards
from pile.tokenizer_job import run_tokenizer

RESOURCE_CONFIG = Path("/opt/ml/config/resourceconfig.json")
log = logging.getLogger("preprocess")


def current_host(resource_config: Path = RESOURCE_CONFIG) -> str:
    """``current_host`` of the SageMaker resource config, or ``algo-1`` outside SageMaker."""
    try:
        return json.loads(resource_config.read_text())["current_host"]
    except (OSError, ValueError, KeyError):
        return "algo-1"


def host_name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._]+(-[A-Za-z0-9._]+)*", text):
        raise argparse.ArgumentTypeError(f"host must be letters, digits, '.', '_' and single '-': {text!r}")
    return text


def name_list(text: str) -> frozenset[str]:
    return frozenset(name.strip() for name in text.split(",") if name.strip())


class AddNames(argparse.Action):
    """A comma list of names, added to those of the option's earlier uses: the Plan step passes one name an argument
    (``--pile_set_names=Gutenberg (PG-19)``), as SageMaker caps a container argument at 256 characters."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, getattr(namespace, self.dest) | name_list(values))


def field_name(text: str) -> str:
    if not text or len(text) > 128 or not text.isprintable():
        raise argparse.ArgumentTypeError(f"a field name is 1 to 128 printable characters: {text!r}")
    return text


def _name_and_value(text: str, value: str) -> tuple[str, str]:
    name, colon, rest = text.partition(":")
    if not colon or not rest.strip():
        raise argparse.ArgumentTypeError(f"give NAME:{value}, not {text!r}")
    return name, rest


def source_weight(text: str) -> tuple[str, float]:
    """``--source=NAME:WEIGHT``."""
    name, weight = _name_and_value(text, "WEIGHT")
    if not is_source_name(name):
        raise argparse.ArgumentTypeError(f"source name {name!r}: use a name {SOURCE_NAME_RULE}")
    try:
        value = float(weight)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"weight {weight!r} of {name}: give a positive finite number")
    return name, value


def source_text_field(text: str) -> tuple[str, str]:
    """``--source_text_field=NAME:FIELD``."""
    name, field = _name_and_value(text, "FIELD")
    return name, field_name(field)


def source_pile_set_name(text: str) -> tuple[str, str]:
    """``--source_pile_set_names=NAME:SUBSET``, one Pile subset name (spaces allowed)."""
    name, subset = _name_and_value(text, "SUBSET")
    return name, subset.strip()


def _known(option: str, name: str, weights: dict[str, float]) -> None:
    if name not in weights:
        named = ", ".join(weights) or "none"
        raise ValueError(f"{option}: {name!r} is no --source (sources: {named}): name one of those, or add --source")


def mix_sources(args: argparse.Namespace) -> tuple[Source, ...]:
    """The sources of ``--source`` and their options, sorted by name; ``()`` without ``--source``.

    Raises ValueError, one line naming the option and the fix, for a refused combination.
    """
    weights: dict[str, float] = {}
    for name, weight in args.source:
        if name in weights:
            raise ValueError(f"--source: {name} is given twice: give each source once")
        weights[name] = weight
    fields: dict[str, str] = {}
    for name, field in args.source_text_field:
        _known("--source_text_field", name, weights)
        if name in fields:
            raise ValueError(f"--source_text_field: {name} is given twice: give one field a source")
        fields[name] = field
    subsets: dict[str, set[str]] = {name: set() for name in weights}
    for name, subset in args.source_pile_set_names:
        _known("--source_pile_set_names", name, weights)
        subsets[name].add(subset)
    if weights and args.pile_set_names:
        raise ValueError("--pile_set_names: not with --source; give --source_pile_set_names=NAME:SUBSET per source")
    return tuple(
        Source(name, weights[name], fields.get(name, args.text_field), frozenset(subsets[name]))
        for name in sorted(weights)
    )


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


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--input_dir",
        type=Path,
        default=Path("/opt/ml/processing/input/raw"),
        help=f"raw {', '.join(SUFFIXES)} files, searched recursively",
    )
    common.add_argument(
        "--text_field",
        type=field_name,
        default=DEFAULT_TEXT_FIELD,
        help="the JSON field or Parquet column holding a document's text",
    )
    common.add_argument(
        "--tokenizer_dir",
        type=Path,
        default=Path("/opt/ml/processing/input/tokenizer"),
        help="shards: folder holding tokenizer.json (or the file itself)",
    )
    common.add_argument("--output_dir", type=Path, default=Path("/opt/ml/processing/output/dataset"))
    common.add_argument("--vocab_size", type=positive_int, default=50257, help="tokenizer: vocabulary size")
    common.add_argument(
        "--sample_bytes",
        type=parse_size,
        default=parse_size("1G"),
        help="tokenizer: text to train on, spread over all inputs (e.g. 1G, 500M)",
    )
    common.add_argument(
        "--sequence_length",
        type=positive_int,
        default=2048,
        help="shards: the model's context; records hold sequence_length + 1 tokens",
    )
    common.add_argument("--shard_size_mb", type=float, default=1024.0, help="shards: about this many MiB a shard")
    common.add_argument(
        "--validation_fraction",
        type=fraction,
        default=0.0005,
        help="shards: share of documents for validation (chosen by a hash of input and position)",
    )
    common.add_argument(
        "--pile_set_names",
        action=AddNames,
        default=frozenset(),
        help="comma-separated meta.pile_set_name values to keep, the option repeatable; none keeps all",
    )
    common.add_argument(
        "--source",
        type=source_weight,
        action="append",
        default=[],
        help="NAME:WEIGHT, repeatable: a mix, each source read from <input_dir>/<NAME>/ (nothing else read)",
    )
    common.add_argument(
        "--source_text_field",
        type=source_text_field,
        action="append",
        default=[],
        help="NAME:FIELD: that source's text field or column (default: --text_field)",
    )
    common.add_argument(
        "--source_pile_set_names",
        type=source_pile_set_name,
        action="append",
        default=[],
        help="NAME:SUBSET, repeatable, one meta.pile_set_name a use: that source's subsets to keep; none keeps all",
    )
    common.add_argument("--workers", type=int, default=0, help="shards: encoding processes; 0 = every core")
    common.add_argument(
        "--host",
        type=host_name,
        default=None,
        help="name in shard and manifest names; default: current_host of SageMaker's resourceconfig",
    )
    common.add_argument("--progress_seconds", type=float, default=30.0, help="seconds between progress lines")
    parser = argparse.ArgumentParser(prog="preprocess.py", description=__doc__.split("\n")[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    modes.add_parser("tokenizer", parents=[common], help="train the tokenizer (one instance)")
    modes.add_parser("shards", parents=[common], help="tokenize and pack this host's inputs (many instances)")
    return parser


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        sources = mix_sources(args)
    except ValueError as e:
        parser.error(str(e))
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    host = args.host or current_host()
    started = time.monotonic()
    try:
        if args.mode == "tokenizer":
            run_tokenizer(
                args.input_dir,
                args.output_dir,
                args.vocab_size,
                args.sample_bytes,
                args.pile_set_names,
                args.progress_seconds,
                args.text_field,
                sources,
            )
        else:
            config = ShardsConfig(
                input_dir=args.input_dir,
                tokenizer=args.tokenizer_dir,
                output_dir=args.output_dir,
                host=host,
                sequence_length=args.sequence_length,
                shard_size_mb=args.shard_size_mb,
                validation_fraction=args.validation_fraction,
                pile_set_names=args.pile_set_names,
                text_field=args.text_field,
                workers=args.workers or available_cores(),
                progress_seconds=args.progress_seconds,
                sources=sources,
            )
            manifest = run_shards(config)
            summary = manifest.to_json()
            summary.pop("shards")
            summary["shards"] = len(manifest.shards)
            summary["seconds"] = round(time.monotonic() - started, 1)
            log.info("summary: %s", json.dumps(summary, sort_keys=True))
    except (InputError, FileNotFoundError, ValueError) as e:
        print(f"preprocess.py {args.mode}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
