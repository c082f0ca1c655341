"""What each cdk-nag pack finds in a stage: ``python -m tests.nag_report [--packs all] [STAGE ...]``.

Synthesizes each stage as ``cdk synth`` does and prints, per pack and rule, the findings left open (they fail
synth) and those acknowledged (their reasons are in the template). ``--packs all`` runs all four packs
whatever the stage selects.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import tempfile
from pathlib import Path

import aws_cdk as cdk

from infra.app import CONTEXT_KEYS, build_app
from infra.config import COMPLIANCE_PACKS, load_stage_config
from tests.synth import cli_context


def pack_findings(stage: str, all_packs: bool) -> dict[str, dict[str, collections.Counter]]:
    """Pack name -> {"open": rule -> count, "acknowledged": rule -> count} from the synth's validation report."""
    context = cli_context(stage=stage)
    config = load_stage_config({key: context.get(key) for key in CONTEXT_KEYS})
    if all_packs:
        config = dataclasses.replace(
            config, security=dataclasses.replace(config.security, compliance_packs=COMPLIANCE_PACKS)
        )
    out = Path(tempfile.mkdtemp(prefix="cdk.out-"))
    app = cdk.App(context=context, outdir=str(out))
    build_app(app, config)
    with contextlib.suppress(RuntimeError):  # open findings fail synth; the report lists them
        app.synth()
    report = json.loads((out / "validation-report.json").read_text())
    found = {}
    for plugin in report["pluginReports"]:
        counts = {kind: collections.Counter() for kind in ("open", "acknowledged")}
        for kind, key in (("open", "violations"), ("acknowledged", "suppressedViolations")):
            for violation in plugin.get(key, []):
                counts[kind][violation["ruleName"]] += len(violation["violatingConstructs"])
        found[plugin["pluginName"]] = counts
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stages", nargs="*", default=["dev", "prod"])
    parser.add_argument("--packs", choices=["stage", "all"], default="stage")
    args = parser.parse_args()
    for stage in args.stages:
        for pack, counts in pack_findings(stage, args.packs == "all").items():
            if pack in ("CloudFormation Validate", "Construct Annotations"):
                continue
            opened, acked = counts["open"], counts["acknowledged"]
            print(f"{stage} {pack}: {sum(opened.values())} open, {sum(acked.values())} acknowledged")
            for rule in sorted(opened | acked):
                print(f"  {rule}: {opened[rule]} open, {acked[rule]} acknowledged")


if __name__ == "__main__":
    main()
