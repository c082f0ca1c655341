"""Entry point of the preprocessing Processing jobs: raw Pile-format text to a tokenizer and token shards.

    python preprocess.py tokenizer [--input_dir ...] [--output_dir ...] [--vocab_size 50257] [--sample_bytes 1G]
    python preprocess.py shards [--input_dir ...] [--tokenizer_dir ...] [--output_dir ...] [--sequence_length 2048]

Every option has a default that matches the SageMaker Processing paths; every option is accepted by both modes
(container arguments are easier to assemble that way), each mode reads the ones it needs. See PREPROCESSING.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from pathlib import Path

from contract.formats import DEFAULT_TEXT_FIELD, SUFFIXES
from contract.sizes import parse_size
from pile.inputs import InputError
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
    args = build_parser().parse_args(argv)
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
