"""Entry point of the preprocessing Processing jobs: raw Pile-format text to a tokenizer and token shards.

    python preprocess.py tokenizer [--input_dir ...] [--output_dir ...] [--vocab_size 50257] [--sample_bytes 1G]
    python preprocess.py shards [--input_dir ...] [--tokenizer_dir ...] [--output_dir ...] [--sequence_length 2048]
    python preprocess.py MODE --source=web:0.7 --source=code:0.3 [--source_text_field=code:content] ...  (a mix)

Every option has a default that matches the SageMaker Processing paths; every option is accepted by both modes
(container arguments are easier to assemble that way), each mode reads the ones it needs. The options' one table,
which the Plan step writes the jobs' arguments with: contract/preprocess_options.py. See PREPROCESSING.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from contract import formats, hparams, sizes
from contract.preprocess_options import add_options, options
from pile.inputs import InputError, Source
from pile.shards_job import ShardsConfig, run_shards
from pile.tokenizer_job import run_tokenizer

RESOURCE_CONFIG = Path("/opt/ml/config/resourceconfig.json")
log = logging.getLogger("preprocess")
OPTIONS = options(formats, hparams, sizes)


def current_host(resource_config: Path = RESOURCE_CONFIG) -> str:
    """``current_host`` of the SageMaker resource config, or ``algo-1`` outside SageMaker."""
    try:
        return json.loads(resource_config.read_text())["current_host"]
    except (OSError, ValueError, KeyError):
        return "algo-1"


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


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    add_options(common, OPTIONS)
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
