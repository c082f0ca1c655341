"""The checks that guard every synth: cdk-nag fails it on a finding, cfn-lint finds nothing, the CLI agrees."""

from __future__ import annotations

import copy
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
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs

from infra.app import build_app
from infra.config import COMPLIANCE_PACKS, load_stage_config
from infra.nag import COMPLIANCE, acknowledge_compliance, rule_prefix
from tests.synth import ROOT, cli_context, scrub_asset_hashes, synth_template, validation_report

STAGES = ("dev", "prod")


def open_findings(report: dict) -> dict[str, dict[str, set[str]]]:
    """Each cdk-nag pack that ran -> construct path -> its unacknowledged findings, from a validation report."""
    found = {}
    for plugin in report["pluginReports"]:
        if plugin["pluginName"] in PREFIXES:
            by_path = found.setdefault(plugin["pluginName"], {})
            for violation in plugin.get("violations", []):
                for construct in violation["violatingConstructs"]:
                    by_path.setdefault(construct["constructPath"], set()).add(violation["ruleName"])
    return found


PREFIXES = {rule_prefix(name): name for name in COMPLIANCE_PACKS}  # NIST.800.53.R5 -> NIST80053R5
# Per pack, a construct only it finds fault with: a queue with no dead-letter queue and no TLS-only policy
# (AwsSolutions only), and an unencrypted log group for each compliance pack (they share the rule, so each group
# is acknowledged for the other two).
SEEDED = {
    "AwsSolutions": ("SeededAwsSolutions", {"AwsSolutions-SQS3", "AwsSolutions-SQS4"}),
    **{name: (f"Seeded{name}", {f"{rule_prefix(name)}-CloudWatchLogGroupEncrypted"}) for name in COMPLIANCE},
}


def seeded_synth(packs: list[str]) -> tuple[str, dict]:
    """Synthesizes the dev stage, running ``packs``, with every seeded construct; the error and the report."""
    context = cli_context()
    context["stages"]["dev"] = {**context["stages"]["dev"], "security": {"compliance_packs": packs}}
    out = Path(tempfile.mkdtemp(prefix="cdk.out-"))
    app = cdk.App(context=context, outdir=str(out))
    stack = build_app(app, load_stage_config(context))
    sqs.CfnQueue(stack, SEEDED["AwsSolutions"][0])
    for name in COMPLIANCE:
        group = logs.CfnLogGroup(stack, SEEDED[name][0], retention_in_days=7)
        others = [other for other in COMPLIANCE if other != name]
        acknowledge_compliance(group, {"CloudWatchLogGroupEncrypted": f"seeded: only {name} finds it"}, others)
    with pytest.raises(RuntimeError) as error:
        app.synth()
    return str(error.value), json.loads((out / "validation-report.json").read_text())


def expected_findings(packs: list[str]) -> dict[str, dict[str, set[str]]]:
    return {rule_prefix(name): {f"GptPretraining-dev/{SEEDED[name][0]}": SEEDED[name][1]} for name in packs}


@pytest.fixture(scope="module")
def all_packs_seeded() -> tuple[str, dict]:
    return seeded_synth(list(COMPLIANCE_PACKS))


def test_each_pack_runs_and_fails_synthesis_on_the_finding_only_it_raises(all_packs_seeded: tuple[str, dict]):
    error, report = all_packs_seeded
    assert open_findings(report) == expected_findings(list(COMPLIANCE_PACKS))
    for _, rules in SEEDED.values():
        for rule in rules:
            assert f"{rule.rsplit('-', 1)[0]}::{rule}" in error, f"{rule} not in the synth error:\n{error[-2000:]}"


def test_the_pack_checks_catch_a_pack_that_did_not_run_or_found_nothing(all_packs_seeded: tuple[str, dict]):
    _, report = all_packs_seeded
    without_hipaa = {"pluginReports": [p for p in report["pluginReports"] if p["pluginName"] != "HIPAA.Security"]}
    assert set(open_findings(without_hipaa)) == set(PREFIXES) - {"HIPAA.Security"}
    assert "HIPAA.Security did not run: no report of it in cdk.out" in pack_problems(without_hipaa)
    blind = copy.deepcopy(report)
    pci = next(p for p in blind["pluginReports"] if p["pluginName"] == "PCI.DSS.321")
    pci.update(violations=[], suppressedViolations=[])
    assert open_findings(blind) == {**expected_findings(list(COMPLIANCE_PACKS)), "PCI.DSS.321": {}}
    assert "PCI.DSS.321 acknowledged nothing: did it check anything?" in pack_problems(blind)
    assert "NIST.800.53.R5: failure" in pack_problems(report)  # the seeded findings fail it


def test_a_stage_runs_the_packs_it_selects_and_no_others():
    error, report = seeded_synth(["AwsSolutions", "PCIDSS321"])
    assert open_findings(report) == expected_findings(["AwsSolutions", "PCIDSS321"])
    assert "PCI.DSS.321-CloudWatchLogGroupEncrypted" in error
    assert "NIST.800.53.R5" not in error


def pack_problems(report: dict) -> list[str]:
    """What a validation report shows wrong with the packs: one that did not run, failed or acknowledged nothing."""
    plugins = {p["pluginName"]: p for p in report["pluginReports"]}
    problems = []
    for prefix in PREFIXES:
        if prefix not in plugins:
            problems.append(f"{prefix} did not run: no report of it in cdk.out")
            continue
        if plugins[prefix]["conclusion"] != "success":
            problems.append(f"{prefix}: {plugins[prefix]['conclusion']}")
        if not plugins[prefix].get("suppressedViolations"):
            problems.append(f"{prefix} acknowledged nothing: did it check anything?")
    return problems


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_runs_all_four_packs_and_passes_them_with_acknowledgments_in_the_template(stage: str):
    assert load_stage_config(cli_context(stage=stage)).security.compliance_packs == COMPLIANCE_PACKS
    assert pack_problems(validation_report(stage)) == []
    acknowledged = {
        rule["id"].split("::")[0]
        for resource in synth_template(stage)["Resources"].values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    }
    assert set(PREFIXES) <= acknowledged


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
