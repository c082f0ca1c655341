"""``python -m infra.estimate``: print a training run's estimate, or every preset against every GPU instance type.

Examples:
    python -m infra.estimate --preset gpt3-1.3b --instance-type ml.p3.16xlarge --instance-count 10 --precision fp16
    python -m infra.estimate --stage prod            # the stage's training config from cdk.json
    python -m infra.estimate --all --train-tokens 300B
    make estimate ARGS="--preset gpt3-2.7b --instance-type ml.p4de.24xlarge --recompute"
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

from infra.estimate.estimate import DEFAULT_MFU, PRECISIONS, EstimateInputs, estimate_for_config, estimate_inputs
from infra.estimate.layouts import with_suggestions
from infra.estimate.memory import OPTIMIZER_BYTES_PER_PARAMETER
from infra.estimate.report import describe, describe_all
from infra.instances import INSTANCE_TYPES
from infra.presets import model_presets, shape_of

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
_SUFFIXES = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def token_count(text: str) -> int:
    """'300B' -> 300,000,000,000; '1.5T', '10M', '300e9' and '524_288' work too."""
    match = re.fullmatch(r"([0-9_.]+(?:e[0-9]+)?)\s*([kmbgt]?)", text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a count like 300B, 1.5T, 10M or 524288")
    return round(float(match.group(1).replace("_", "")) * _SUFFIXES[match.group(2)])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m infra.estimate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--all", action="store_true", help="every preset x every GPU instance type")
    parser.add_argument("--stage", help="estimate this stage's training config from cdk.json (other options ignored)")
    parser.add_argument("--json", action="store_true", help="print the estimate and the suggestions as JSON")
    parser.add_argument("--preset", default="gpt3-125m", choices=sorted(model_presets()))
    parser.add_argument("--n-layer", type=int)
    parser.add_argument("--d-model", type=int)
    parser.add_argument("--n-head", type=int)
    parser.add_argument("--vocab-size", type=int, default=50_257)
    parser.add_argument("--sequence-length", type=int, default=2048)
    parser.add_argument("--micro-batch-size", type=int, default=8)
    parser.add_argument("--global-batch-tokens", type=token_count, default=524_288)
    parser.add_argument("--train-tokens", type=token_count, default=300_000_000_000)
    parser.add_argument("--precision", default="bf16", choices=PRECISIONS)
    parser.add_argument("--optimizer", default="adamw", choices=sorted(OPTIMIZER_BYTES_PER_PARAMETER))
    parser.add_argument("--recompute", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--instance-type", default="ml.p4d.24xlarge", choices=sorted(INSTANCE_TYPES), metavar="TYPE")
    parser.add_argument("--instance-count", type=int, default=1)
    parser.add_argument("--model-parallel-degree", type=int, default=1)
    parser.add_argument("--microbatches", type=int, default=0, help="per GPipe pass (default 0: the whole step)")
    parser.add_argument("--mfu", type=float, default=DEFAULT_MFU, help="model-FLOPs utilisation (default 0.4)")
    return parser.parse_args(argv)


def inputs_from_args(args: argparse.Namespace) -> EstimateInputs:
    return EstimateInputs(
        shape=shape_of(args.preset, args.n_layer, args.d_model, args.n_head),
        vocab_size=args.vocab_size,
        sequence_length=args.sequence_length,
        micro_batch_size=args.micro_batch_size,
        precision=args.precision,
        optimizer=args.optimizer,
        recompute=args.recompute,
        instance_type=args.instance_type,
        instance_count=args.instance_count,
        model_parallel_degree=args.model_parallel_degree,
        global_batch_tokens=args.global_batch_tokens,
        train_tokens=args.train_tokens,
        mfu=args.mfu,
        microbatches=args.microbatches,
        preset=args.preset,
    )


def stage_estimate_inputs(stage: str, mfu: float) -> EstimateInputs:
    """The stage's training config from cdk.json, without the fit check that would stop synthesis."""
    from infra.config import PreprocessingConfig, TrainingConfig

    stages = json.loads(CDK_JSON.read_text())["context"]["stages"]
    if stage not in stages:
        raise SystemExit(f"--stage {stage!r}: expected one of {', '.join(stages)}")
    training = dataclasses.replace(TrainingConfig(), **stages[stage].get("training", {}))
    preprocessing = dataclasses.replace(PreprocessingConfig(), **stages[stage].get("preprocessing", {}))
    return estimate_for_config(training, preprocessing.vocab_size, mfu=mfu).inputs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        inputs = stage_estimate_inputs(args.stage, args.mfu) if args.stage else inputs_from_args(args)
        if args.all:
            print(describe_all(inputs))
            return 0
        result = estimate_inputs(inputs)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(with_suggestions(result), indent=2) if args.json else describe(result))
    return 0 if result.fits else 1


if __name__ == "__main__":
    sys.exit(main())
