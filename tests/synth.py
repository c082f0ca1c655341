"""Synthesizes the app in-process exactly as ``cdk synth`` does: same context, same feature flags."""

from __future__ import annotations

import functools
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from infra.app import CONTEXT_KEYS, build_app
from infra.config import load_stage_config

ROOT = Path(__file__).resolve().parent.parent
ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def cli_context(**overrides: Any) -> dict[str, Any]:
    """cdk.json's context, then cdk.context.json, then ``-c`` overrides: the order the CLI merges them."""
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    context.update(json.loads((ROOT / "cdk.context.json").read_text()))
    # The CLI sets these; resources then carry their construct path and asset metadata.
    context.update({"aws:cdk:enable-path-metadata": True, "aws:cdk:enable-asset-metadata": True})
    context.update(overrides)
    return context


@functools.cache
def _synth(stage: str, config_file: str | None) -> tuple[dict[str, Any], Path]:
    context = cli_context(stage=stage, **({"config": config_file} if config_file else {}))
    out = Path(tempfile.mkdtemp(prefix="cdk.out-"))
    app = cdk.App(context=context, outdir=str(out))
    config = load_stage_config({key: context.get(key) for key in CONTEXT_KEYS})
    stack = build_app(app, config)
    return Template.from_stack(stack).to_json(), out


def synth_template(stage: str = "dev", config_file: str | None = None) -> dict[str, Any]:
    """The stage's CloudFormation template; built once per process for each (stage, config file)."""
    return _synth(stage, config_file)[0]


def validation_report(stage: str = "dev") -> dict[str, Any]:
    """What that synth's validation plugins (the cdk-nag packs, cfn-lint) found: cdk.out/validation-report.json."""
    return json.loads((_synth(stage, None)[1] / "validation-report.json").read_text())


def scrub_asset_hashes(template: dict[str, Any]) -> dict[str, Any]:
    """Replaces content hashes (they change with every edit of training/) with a fixed marker."""
    return json.loads(ASSET_HASH.sub("<asset-hash>", json.dumps(template)))
