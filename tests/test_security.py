"""The security gate: checkov on every synthesized template, and the IAM of the stack against its review.

checkov (CloudFormation framework, pinned in requirements-checkov.txt, installed by ``make install`` in a
virtual environment of its own, ``.venv/checkov``) runs once per session on both stages' templates and a
canary template that must fail. The IAM tests compare every statement the templates create with
tests/iam_reviewed.py, so any new permission is a deliberate change there and in SECURITY.md.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path

import pytest

from infra.app import CONTEXT_KEYS
from infra.config import PLACEHOLDER_ACCOUNT, load_stage_config
from tests import iam_reviewed as reviewed
from tests.iam_policies import PolicyReader, Statement, permissions
from tests.synth import ROOT, cli_context, synth_template

STAGES = ("dev", "prod")
CHECKOV = ROOT / ".venv" / "checkov" / "bin" / "checkov"
SECURITY_MD = ROOT / "SECURITY.md"

# Every checkov skip in the templates: (check, resource) -> the stages that carry it. The reasons are in the
# templates (infra/checkov.py, infra/storage/buckets.py, infra/workflow/plan_function.py,
# infra/observability/capacity_alarm.py); a new skip is added here.
PROVIDER_CHECKS = ("CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117")
CHECKOV_SKIPS: dict[tuple[str, str], tuple[str, ...]] = {
    **{(c, "Custom::VpcRestrictDefaultSGCustomResourceProvider/Handler"): STAGES for c in PROVIDER_CHECKS},
    **{(c, "Custom::S3AutoDeleteObjectsCustomResourceProvider/Handler"): ("dev",) for c in PROVIDER_CHECKS},
    **{(c, name): STAGES for c in PROVIDER_CHECKS for name in ("Plan/Function", "CapacityWatch/Function")},
    ("CKV_AWS_18", "Buckets/AccessLogs"): STAGES,
    **{("CKV_AWS_21", f"Buckets/{name}"): STAGES for name in ("AccessLogs", "Raw")},
}

# A template checkov must fail: a bare bucket and a bare function (proves the gate can fail).
CANARY = {
    "Resources": {
        "Careless": {"Type": "AWS::S3::Bucket", "Properties": {}},
        "Bare": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Runtime": "python3.12",
                "Handler": "index.handler",
                "Role": "arn:aws:iam::123456789012:role/r",
                "Code": {"ZipFile": "def handler(e, c): pass"},
                "Environment": {"Variables": {"A": "b"}},
            },
        },
    }
}
CANARY_FAILURES = {("CKV_AWS_18", "Careless"), ("CKV_AWS_21", "Careless"), ("CKV_AWS_116", "Bare")}


# ---- checkov -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkov(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[dict]]]:
    """checkov's checks per template (``dev``, ``prod``, ``canary``): passed, failed and skipped lists."""
    assert CHECKOV.exists(), f"{CHECKOV} is missing: run `make install` (it builds checkov's own environment)"
    folder = tmp_path_factory.mktemp("checkov")
    templates = {stage: synth_template(stage) for stage in STAGES} | {"canary": CANARY}
    for name, template in templates.items():
        (folder / f"{name}.template.json").write_text(json.dumps(template))
    result = subprocess.run(
        [str(CHECKOV), "--framework", "cloudformation", "--output", "json", "--skip-download", "--directory", "."],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 1: failed checks (the canary's)
    report = json.loads(result.stdout)
    reports = report if isinstance(report, list) else [report]
    assert [r["check_type"] for r in reports] == ["cloudformation"]
    results = reports[0]["results"]
    assert not results["parsing_errors"], results["parsing_errors"]
    by_template: dict[str, dict[str, list[dict]]] = {name: {} for name in templates}
    for outcome in ("passed", "failed", "skipped"):
        for check in results[f"{outcome}_checks"]:
            name = Path(check["file_path"]).name.removesuffix(".template.json")
            by_template[name].setdefault(outcome, []).append(check)
    return by_template


def logical_id(check: dict) -> str:
    return check["resource"].split(".", 1)[1]


@pytest.mark.parametrize("stage", STAGES)
def test_checkov_finds_no_failed_check(stage: str, checkov: dict, capsys: pytest.CaptureFixture):
    checks = checkov[stage]
    with capsys.disabled():
        print(
            f"\ncheckov {stage}: {len(checks.get('passed', []))} passed, {len(checks.get('failed', []))} failed, "
            f"{len(checks.get('skipped', []))} skipped"
        )
    failed = [f"{c['check_id']} {c['resource']}: {c['check_name']}" for c in checks.get("failed", [])]
    assert failed == [], "fix the finding, or skip it in the template with a reason (infra/checkov.py)"


@pytest.mark.parametrize("stage", STAGES)
def test_checkov_skips_are_the_reviewed_few_each_with_its_reason(stage: str, checkov: dict):
    reader = PolicyReader(synth_template(stage))
    skipped = {(c["check_id"], reader.name(logical_id(c))): c for c in checkov[stage].get("skipped", [])}
    assert set(skipped) == {skip for skip, stages in CHECKOV_SKIPS.items() if stage in stages}
    for (check, resource), c in skipped.items():
        comment = c["check_result"].get("suppress_comment") or ""
        assert len(comment) >= 60, f"{check} on {resource}: give a reason a reviewer would accept"


@pytest.mark.parametrize("stage", STAGES)
def test_checkov_evaluated_every_resource_it_has_checks_for(stage: str, checkov: dict):
    evaluated = {logical_id(c) for outcome in checkov[stage].values() for c in outcome}
    kinds = (
        "AWS::S3::Bucket",
        "AWS::Lambda::Function",
        "AWS::IAM::Policy",
        "AWS::IAM::Role",
        "AWS::KMS::Key",
        "AWS::Logs::LogGroup",
        "AWS::SNS::Topic",
        "AWS::EFS::FileSystem",
        "AWS::EC2::SecurityGroup",
    )
    resources = synth_template(stage)["Resources"]
    expected = {name for name, r in resources.items() if r["Type"] in kinds}
    assert expected <= evaluated, sorted(expected - evaluated)


def test_checkov_fails_a_careless_template(checkov: dict):
    failed = {(c["check_id"], logical_id(c)) for c in checkov["canary"].get("failed", [])}
    assert failed >= CANARY_FAILURES


# ---- IAM against its review ----------------------------------------------------------------------------


def settings(stage: str) -> set[str]:
    """The ``ONLY_WITH`` settings that hold for the stage's configuration."""
    context = cli_context(stage=stage)
    config = load_stage_config({key: context.get(key) for key in CONTEXT_KEYS})
    return {
        name
        for name, on in (
            ("auto_delete", not config.storage.retain_data),
            ("isolated", config.network.isolated),
        )
        if on
    }


def excluded(stage: str) -> list[tuple[str, str | None]]:
    held = settings(stage)
    return [entry for setting, entries in reviewed.ONLY_WITH.items() if setting not in held for entry in entries]


def expected_permissions(stage: str) -> dict[str, dict[str, set[str]]]:
    out: dict[str, dict[str, set[str]]] = {}
    drop = excluded(stage)
    for holder, by_principal in reviewed.PERMISSIONS.items():
        for principal, entries in by_principal.items():
            if (holder, None) in drop or (holder, principal) in drop:
                continue
            out.setdefault(holder, {})[principal] = set(entries)
    return out


def unreviewed(template: dict, stage: str) -> list[str]:
    """Differences between the template's permissions and the review, as readable lines (empty: none)."""
    actual, expected = permissions(PolicyReader(template).statements()), expected_permissions(stage)
    lines = []
    for holder in sorted(set(actual) | set(expected)):
        for principal in sorted(set(actual.get(holder, {})) | set(expected.get(holder, {}))):
            got, want = actual.get(holder, {}).get(principal, set()), expected.get(holder, {}).get(principal, set())
            lines += [f"new, not reviewed: {holder} <- {principal}: {e}" for e in sorted(got - want)]
            lines += [f"reviewed, not granted any more: {holder} <- {principal}: {e}" for e in sorted(want - got)]
    return lines


def wildcard_actions(statements: list[Statement]) -> list[str]:
    """Allow statements' actions with a wildcard that the review does not list."""
    return [
        f"{s.holder} <- {s.principal or 'self'}: {a}"
        for s in statements
        if s.effect == "Allow"
        for a in s.actions
        if "*" in a and (s.holder, s.principal or "self", a) not in reviewed.WILDCARD_ACTIONS
    ]


@pytest.mark.parametrize("stage", STAGES)
def test_roles_trust_and_managed_policies_are_the_reviewed_ones(stage: str):
    roles = PolicyReader(synth_template(stage)).roles()
    drop = excluded(stage)
    expected = {name: role for name, role in reviewed.ROLES.items() if (name, None) not in drop}
    assert set(roles) == set(expected)
    for name, (service, condition_keys, managed) in expected.items():
        assert roles[name]["trust"] == [(service, condition_keys)], name
        assert tuple(roles[name]["managed"]) == managed, name


@pytest.mark.parametrize("stage", STAGES)
def test_every_permission_is_the_reviewed_one(stage: str):
    assert unreviewed(synth_template(stage), stage) == [], "review the change in tests/iam_reviewed.py and SECURITY.md"


@pytest.mark.parametrize("stage", STAGES)
def test_no_wildcard_action_but_the_reviewed_exceptions(stage: str):
    assert wildcard_actions(PolicyReader(synth_template(stage)).statements()) == []


@pytest.mark.parametrize("stage", STAGES)
def test_roles_use_resource_star_only_where_aws_offers_no_resource_level_permission(stage: str):
    statements = [s for s in PolicyReader(synth_template(stage)).statements() if s.identity]
    on_any = {a for s in statements if "*" in s.resources for a in s.actions}
    assert on_any <= set(reviewed.ANY_RESOURCE), sorted(on_any - set(reviewed.ANY_RESOURCE))


@pytest.mark.parametrize("stage", STAGES)
def test_conditions_name_this_account_this_vpc_and_the_expected_services(stage: str):
    account, region = "${AWS::AccountId}", "${AWS::Region}"
    values: dict[str, set[str]] = {}
    for s in PolicyReader(synth_template(stage)).statements():
        for by_key in s.conditions.values():
            for key, vals in by_key.items():
                values.setdefault(key, set()).update(vals)
    assert values["iam:PassedToService"] == {"sagemaker.amazonaws.com"}
    assert values["kms:ViaService"] == {f"{s}.{region}.amazonaws.com" for s in ("s3", "sns", "sagemaker")}
    assert values["kms:GrantIsForAWSResource"] == {"true"}
    assert values["ec2:Vpc"] == {f"arn:aws:ec2:{region}:{account}:vpc/${{Network/Vpc}}"}
    assert values["aws:SourceAccount"] == {account}
    assert values["cloudwatch:namespace"] == {"/aws/sagemaker/*"}
    for key in ("aws:PrincipalAccount", "aws:ResourceAccount"):
        assert values.get(key, {account}) == {account}, key
    for role, (_, condition_keys, _) in reviewed.ROLES.items():
        if condition_keys:
            assert "aws:SourceAccount" in condition_keys, role


def test_the_review_catches_a_widened_role():
    template = copy.deepcopy(synth_template("dev"))
    policy = next(
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and "SageMakerExecution/Policy" in r["Metadata"]["aws:cdk:path"]
    )
    policy["Properties"]["PolicyDocument"]["Statement"].append({"Effect": "Allow", "Action": "s3:*", "Resource": "*"})
    assert unreviewed(template, "dev") == ["new, not reviewed: SageMakerExecution/Role <- self: s3:*"]
    assert wildcard_actions(PolicyReader(template).statements()) == ["SageMakerExecution/Role <- self: s3:*"]


# ---- SECURITY.md ---------------------------------------------------------------------------------------


def test_security_md_reviews_every_permission():
    """Each holder's table rows in SECURITY.md name every action the review grants it."""
    rows = [line for line in SECURITY_MD.read_text().splitlines() if line.startswith("| `")]
    missing = []
    for holder, by_principal in reviewed.PERMISSIONS.items():
        for principal, entries in by_principal.items():
            tag = f"`{holder}`" + ("" if principal == "self" else f" ← `{principal}`")
            text = " ".join(row for row in rows if row.split("|")[1].strip() == tag)
            actions = {re.sub(r"^deny | if .*$", "", e) for e in entries}
            missing += [f"{tag}: {a}" for a in sorted(actions) if f"`{a}`" not in text]
    assert missing == []


def test_security_md_states_each_wildcard_and_resource_star_reason():
    text = SECURITY_MD.read_text()
    for action in reviewed.ANY_RESOURCE:
        assert f"`{action}`" in text, action
    assert "kms:*" in text and "s3:List*" in text
    assert PLACEHOLDER_ACCOUNT not in text  # the review is written for any account


def test_an_isolated_stage_admits_its_source_buckets_of_any_account_for_reading(tmp_path_factory):
    """prod's S3 gateway endpoint is its jobs' only way out: this account's buckets, ECR's layers, the sources."""
    override = tmp_path_factory.mktemp("cfg") / "sources.json"
    override.write_text(json.dumps({"source_buckets": ["other-accounts-corpora"]}))
    statements = [s for s in PolicyReader(synth_template("prod", str(override))).statements()]
    endpoint = [s for s in statements if s.holder == "Network/Vpc/S3"]
    sources = [s for s in endpoint if any("other-accounts-corpora" in r for r in s.resources)]
    assert [(s.actions, s.resources, s.conditions) for s in sources] == [
        (
            ("s3:GetBucketLocation", "s3:GetObject", "s3:ListBucket"),
            ("arn:aws:s3:::other-accounts-corpora", "arn:aws:s3:::other-accounts-corpora/*"),
            {},
        )
    ]


def test_source_buckets_and_a_custom_image_widen_only_reads_and_pulls(tmp_path_factory: pytest.TempPathFactory):
    image = "111122223333.dkr.ecr.us-east-1.amazonaws.com/tf-horovod:2.11"
    override = tmp_path_factory.mktemp("cfg") / "sources.json"
    key = "arn:aws:kms:us-east-1:111122223333:key/0b7a8c6e-1d2f-4a3b-9c8d-7e6f5a4b3c2d"
    training = {"image_uri": image, "data_parallel_engine": "mpi"}
    override.write_text(json.dumps({"source_buckets": ["corpora"], "source_bucket_keys": [key], "training": training}))
    template = synth_template("dev", str(override))
    # The one grant that exists only with source_bucket_keys: decrypting the sources' objects, through S3 only.
    assert unreviewed(template, "dev") == [
        f"new, not reviewed: {role} <- self: kms:Decrypt if kms:ViaService"
        for role in ("Plan/Role", "SageMakerExecution/Role")
    ]
    rendered = key.replace("us-east-1", "${AWS::Region}")  # as the reader writes this test's region
    decrypts = [s for s in PolicyReader(template).statements() if s.resources == (rendered,)]
    assert {(s.holder, s.actions, json.dumps(s.conditions)) for s in decrypts} == {
        (role, ("kms:Decrypt",), '{"StringEquals": {"kms:ViaService": ["s3.${AWS::Region}.amazonaws.com"]}}')
        for role in ("Plan/Role", "SageMakerExecution/Role")
    }
    grants = {(s.holder, a, r) for s in PolicyReader(template).statements() for a in s.actions for r in s.resources}
    assert ("SageMakerExecution/Role", "s3:GetObject", "arn:aws:s3:::corpora/*") in grants
    assert ("Plan/Role", "s3:GetObject", "arn:aws:s3:::corpora/*") in grants  # one byte of a corpus file (Plan)
    repository = "arn:aws:ecr:${AWS::Region}:111122223333:repository/tf-horovod"
    pull = ("SageMakerExecution/Role", "ecr:BatchGetImage", repository)
    assert pull in grants
    assert not any(a.startswith("s3:Put") and "corpora" in r for _, a, r in grants)
