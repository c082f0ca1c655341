"""The checks that guard every synth: cdk-nag fails it on a finding, cfn-lint finds nothing, the CLI agrees."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import aws_cdk as cdk
import cdk_nag
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from infra.app import build_app
from infra.config import COMPLIANCE_PACKS, load_stage_config
from infra.nag import rule_prefix
from tests.synth import ROOT, cli_context, scrub_asset_hashes, synth_template

STAGES = ("dev", "prod")


def test_cdk_nag_fails_synthesis_on_an_unacknowledged_finding():
    context = cli_context()
    app = cdk.App(context=context, outdir=tempfile.mkdtemp(prefix="cdk.out-"))
    stack = build_app(app, load_stage_config(context))
    s3.Bucket(stack, "Careless")  # no TLS-only policy, no access logs: AwsSolutions-S1 and S10
    with pytest.raises(RuntimeError, match="AwsSolutions-S10"):
        Template.from_stack(stack)


def careful_bucket(stack: cdk.Stack) -> s3.Bucket:
    """A bucket AwsSolutions accepts (TLS only, access logs) but NIST 800-53 R5 does not: it is not versioned."""
    return s3.Bucket(stack, "Unversioned", enforce_ssl=True, server_access_logs_bucket=stack.buckets.access_logs)


@pytest.mark.parametrize(("packs", "fails"), [(["AwsSolutions"], False), (["AwsSolutions", "NIST80053R5"], True)])
def test_a_selected_compliance_pack_fails_synthesis_on_its_finding(packs: list[str], fails: bool):
    context = cli_context()
    context["stages"]["dev"] = {**context["stages"]["dev"], "security": {"compliance_packs": packs}}
    app = cdk.App(context=context, outdir=tempfile.mkdtemp(prefix="cdk.out-"))
    stack = build_app(app, load_stage_config(context))
    careful_bucket(stack)
    if fails:
        with pytest.raises(RuntimeError, match=r"NIST\.800\.53\.R5-S3BucketVersioningEnabled"):
            Template.from_stack(stack)
    else:
        Template.from_stack(stack)  # the same bucket passes where the stage runs AwsSolutions only


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_passes_all_four_packs_with_their_acknowledgments_in_the_template(stage: str):
    assert load_stage_config(cli_context(stage=stage)).security.compliance_packs == COMPLIANCE_PACKS
    acknowledged = {
        rule["id"].split("::")[0]
        for resource in synth_template(stage)["Resources"].values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    }
    assert {rule_prefix(name) for name in COMPLIANCE_PACKS} <= acknowledged


def pack_rules(source: str) -> set[str]:
    """The rules a compliance pack applies, from cdk-nag's compiled pack (``rule: s3_1.S3BucketVersioningEnabled``)."""
    bundle = next((Path(cdk_nag.__file__).parent / "_jsii").glob("cdk-nag@*.jsii.tgz"))
    with tarfile.open(bundle) as tar:
        code = tar.extractfile(f"package/lib/packs/{source}.js").read().decode()
    return set(re.findall(r"rule: \w+\.(\w+)", code))


@pytest.mark.parametrize("stage", STAGES)
def test_compliance_acknowledgments_name_rules_their_pack_applies(stage: str):
    sources = {"NIST80053R5": "nist-800-53-r5", "HIPAASecurity": "hipaa-security", "PCIDSS321": "pci-dss-321"}
    rules = {rule_prefix(name): pack_rules(source) for name, source in sources.items()}
    stale = [
        f"{resource['Metadata']['aws:cdk:path']}: {rule['id']}"
        for resource in synth_template(stage)["Resources"].values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
        for prefix, _, name in [rule["id"].partition("::")]
        if prefix in rules and name.removeprefix(f"{prefix}-") not in rules[prefix]
    ]
    assert stale == []


@pytest.mark.parametrize("stage", STAGES)
def test_cfn_lint_reports_no_errors_and_no_warnings(stage: str, tmp_path: Path):
    path = tmp_path / f"{stage}.template.json"
    path.write_text(json.dumps(synth_template(stage)))
    result = subprocess.run(
        [str(ROOT / ".venv/bin/cfn-lint"), "--format", "parseable", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,  # reads .cfnlintrc.yaml
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


@pytest.mark.parametrize("stage", STAGES)
def test_template_snapshot(stage: str, snapshot):
    assert scrub_asset_hashes(synth_template(stage)) == snapshot


def test_cdk_cli_synthesizes_without_credentials_and_matches_the_test_build(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        AWS_EC2_METADATA_DISABLED="true",
        JSII_NODE=str(ROOT / "node_modules/.bin/node"),
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
        PATH=f"{ROOT / '.venv/bin'}:{os.environ['PATH']}",
    )
    out = tmp_path / "cdk.out"
    result = subprocess.run(
        [str(ROOT / "node_modules/.bin/cdk"), "synth", "-q", "-c", "stage=dev", "--output", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    template = json.loads((out / "GptPretraining-dev.template.json").read_text())
    template["Resources"].pop("CDKMetadata", None)  # analytics, added by the CLI only
    template.pop("Conditions", None)
    assert scrub_asset_hashes(template) == scrub_asset_hashes(synth_template("dev"))


def test_bad_configuration_stops_synth_with_the_message(tmp_path: Path):
    override = tmp_path / "bad.json"
    override.write_text(json.dumps({"preprocessing": {"shard_size_mb": 0}}))
    context = cli_context(config=str(override))
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        env={**os.environ, "CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert (
        "Invalid configuration: preprocessing.shard_size_mb: 0 is not valid; expected a positive integer"
        in result.stderr
    )
