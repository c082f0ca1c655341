"""``python -m infra.estimate``: print a training run's estimate, or every preset against every GPU instance type.

Every option defaults to the stage's value (``--stage``, default dev, from cdk.json; ``--config`` adds an
override file as ``-c config=`` does), so an estimate agrees with what synthesis and the Plan step check.

Examples:
    python -m infra.estimate --stage prod            # the prod stage's training run as configured
    python -m infra.estimate --preset gpt3-1.3b --instance-type ml.p3.16xlarge --instance-count 10 --precision fp16
    python -m infra.estimate --all --train-tokens 300B
    make estimate ARGS="--preset gpt3-2.7b --instance-type ml.p4de.24xlarge --no-recompute"
    python -m infra.estimate --stage prod --implementation before   # today's naive attention, no XLA

Step times, MFU and tokens/s are modelled (``step_time.py``), never measured: the output says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import sys
from pathlib import Path

from infra.config import ConfigError, StageConfig, build_stage_config, parse_count
from infra.config.validation import suggest_preset
from infra.estimate.estimate import PRECISIONS, estimate_for_config, estimate_inputs
from infra.estimate.layouts import with_suggestions
from infra.estimate.memory import OPTIMIZER_BYTES_PER_PARAMETER
from infra.estimate.report import describe, describe_all
from infra.estimate.runtime import late_problem, needed_hours
from infra.estimate.step_time import AFTER, IMPLEMENTATIONS
from infra.instances import INSTANCE_TYPES
from infra.training_code import model_presets

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
# Options that set a training field of the same name (the rest: --vocab-size, --optimizer, --implementation, ...).
TRAINING_OPTIONS = (
    "n_layer",
    "d_model",
    "n_head",
    "sequence_length",
    "micro_batch_size",
    "global_batch_tokens",
    "train_tokens",
    "precision",
    "recompute",
    "instance_type",
    "instance_count",
    "model_parallel_degree",
    "microbatches",
    "spot",
    "max_run_hours",
)


class UsageError(Exception):
    """A bad option: one line with the fix."""


def token_count(text: str) -> int:
    """'300B' -> 300,000,000,000; '1.5T', '10M', '300e9' and '524_288' work too."""
    try:
        return parse_count(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m infra.estimate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--all", action="store_true", help="every preset x every GPU instance type")
    parser.add_argument("--stage", default="dev", help="the stage whose training config the defaults are (dev)")
    parser.add_argument("--config", help="a JSON file of overrides over the stage, as -c config= for cdk")
    parser.add_argument("--json", action="store_true", help="print the estimate and the suggestions as JSON")
    parser.add_argument("--preset", help="a model preset: " + ", ".join(model_presets()))
    parser.add_argument("--n-layer", type=int)
    parser.add_argument("--d-model", type=int)
    parser.add_argument("--n-head", type=int)
    parser.add_argument("--vocab-size", type=int)
    parser.add_argument("--sequence-length", type=int)
    parser.add_argument("--micro-batch-size", type=int)
    parser.add_argument("--global-batch-tokens", type=token_count)
    parser.add_argument("--train-tokens", type=token_count)
    parser.add_argument("--precision", choices=PRECISIONS)
    parser.add_argument("--optimizer", default="adamw", choices=sorted(OPTIMIZER_BYTES_PER_PARAMETER))
    parser.add_argument("--recompute", action=argparse.BooleanOptionalAction)
    parser.add_argument("--spot", action=argparse.BooleanOptionalAction)
    parser.add_argument("--max-run-hours", type=int)
    parser.add_argument("--instance-type", metavar="TYPE")
    parser.add_argument("--instance-count", type=int)
    parser.add_argument("--model-parallel-degree", type=int)
    parser.add_argument("--microbatches", type=int, help="per GPipe pass (0: the whole step)")
    parser.add_argument(
        "--implementation",
        default=AFTER.name,
        choices=sorted(IMPLEMENTATIONS),
        help="the step whose time is modelled: after (default, the code), before (naive attention, no XLA), "
        "reference (flash attention, fused; llm-foundry's structure)",
    )
    return parser.parse_args(argv)


def stage_config(stage: str, config: str | None) -> StageConfig:
    """The stage's typed values from cdk.json, unchecked: the estimate shows a plan that does not fit yet."""
    context = json.loads(CDK_JSON.read_text())["context"]
    if stage not in context["stages"]:
        raise UsageError(f"--stage {stage!r}: expected one of {', '.join(context['stages'])}")
    return build_stage_config({**context, "stage": stage, **({"config": config} if config else {})})


def run_config(args: argparse.Namespace) -> tuple[StageConfig, int]:
    """The stage's training config with the given options over it, and the vocabulary size."""
    config = stage_config(args.stage, args.config)
    if args.preset is not None and args.preset not in model_presets():
        close = suggest_preset(args.preset)
        raise UsageError(f"--preset {args.preset!r}: expected one of {', '.join(model_presets())}" + _hint(close))
    if args.instance_type is not None and args.instance_type not in INSTANCE_TYPES:
        close = next(iter(difflib.get_close_matches(args.instance_type, list(INSTANCE_TYPES), n=1)), None)
        raise UsageError(f"--instance-type {args.instance_type!r}: not a type the estimate knows" + _hint(close))
    given = {name: getattr(args, name) for name in TRAINING_OPTIONS if getattr(args, name) is not None}
    if args.preset is not None:
        given["model_preset"] = args.preset
    training = dataclasses.replace(config.training, **given)
    return dataclasses.replace(config, training=training), args.vocab_size or config.preprocessing.vocab_size


def _hint(close: str | None) -> str:
    return f" (did you mean {close!r}?)" if close else ""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config, vocab_size = run_config(args)
        training = config.training
        inputs = dataclasses.replace(
            estimate_for_config(training, vocab_size, implementation=IMPLEMENTATIONS[args.implementation]).inputs,
            optimizer=args.optimizer,
        )
        if args.all:
            print(describe_all(inputs))
            return 0
        result = estimate_inputs(inputs)
    except (UsageError, ConfigError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    late = late_problem(result, training.spot, training.max_run_hours) if result.fits else None
    if args.json:
        summary = with_suggestions(result) | {
            "needed_hours": round(needed_hours(result, training.spot), 1),
            "max_run_hours": training.max_run_hours,
            "finishes": late is None,
        }
        print(json.dumps(summary, indent=2))
    else:
        print(describe(result, training.max_run_hours, training.spot))
        if late:
            print(f"\nThe run would not finish: {late}")
    return 0 if result.fits and late is None else 1


if __name__ == "__main__":
    sys.exit(main())
