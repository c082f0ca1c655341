"""``make run`` until the local workflow run exists: synthesize the stage with the CDK CLI and summarize it."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from infra.app import stack_name
from infra.config import ConfigError, load_stage_config

ROOT = Path(__file__).resolve().parent.parent


def synthesize(stage: str, outdir: Path) -> dict:
    """Runs ``cdk synth`` (cdk-nag included) and returns the stack's template."""
    cdk = ROOT / "node_modules" / ".bin" / "cdk"
    subprocess.run([str(cdk), "synth", "-q", "-c", f"stage={stage}", "--output", str(outdir)], cwd=ROOT, check=True)
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    config = load_stage_config({**context, "stage": stage})
    return json.loads((outdir / f"{stack_name(config)}.template.json").read_text())


def describe(stage: str, template: dict) -> str:
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    config = load_stage_config({**context, "stage": stage})
    train, shape = config.training, config.training.shape
    params = shape.parameters(config.preprocessing.vocab_size, train.sequence_length)
    kinds = Counter(r["Type"] for r in template["Resources"].values())
    lines = [
        f"Stage {config.name}: account {config.account}, region {config.region}",
        f"Model {train.model_preset}: {shape.n_layer} layers x {shape.d_model} wide, {shape.n_head} heads "
        f"= {params / 1e6:,.1f} M parameters",
        f"Training: {train.instance_count} x {train.instance_type} ({train.data_parallel_replicas} replicas), "
        f"{train.precision}, global batch {train.global_batch_tokens:,} tokens, spot {'on' if train.spot else 'off'}",
        f"Preprocessing: {config.preprocessing.instance_count} x {config.preprocessing.instance_type}, "
        f"vocabulary {config.preprocessing.vocab_size:,}, shards of {config.preprocessing.shard_size_mb} MB",
        f"Network: {'isolated (VPC endpoints)' if config.network.isolated else f'{config.network.nat_gateways} NAT'}; "
        f"data {'retained' if config.storage.retain_data else 'deleted'} on destroy",
        f"Template: {sum(kinds.values())} resources; cdk-nag AwsSolutions passed",
        *(f"  {count:3d} {kind}" for kind, count in sorted(kinds.items())),
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stage", default="dev")
    parser.add_argument("--outdir", type=Path, default=ROOT / "cdk.out")
    args = parser.parse_args()
    try:
        template = synthesize(args.stage, args.outdir)
        print(describe(args.stage, template))
    except (ConfigError, subprocess.CalledProcessError) as error:
        print(f"Synthesis failed: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
