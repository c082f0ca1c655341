"""Every request the Plan step builds, held against botocore's service models, the API reference's rules and the
SDK; every Task state's static Parameters against its operation's input; the IAM each integration needs.

The matrix covers both stages and the inputs users send: the default, the full and pipeline inputs of docs/, spot
on and off, EFS and S3 data, deploy, long and odd execution names. ``test_*_catch_seeded_defects`` shows each check
failing on a defect of the kind it exists for.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import regex

from infra.aws_limits import aws_limits
from infra.plan_step import processing_requests, requests
from infra.plan_step.conftest import make_settings
from infra.plan_step.execution_input import (
    MAX_PILE_SET_NAMES,
    MAX_SOURCES,
    PILE_SET_OPTION,
    SOURCE_PILE_SET_OPTION,
)
from infra.plan_step.plan import plan_execution
from local.definition import local_arn, resolve_definition
from local.folder_store import FolderStore
from tests.api_contract import (
    CHECKED_KEYS,
    REQUEST_OPERATIONS,
    SESSION,
    UNCONSTRAINING_KEYS,
    documented_rules,
    operation,
    static_parameter_keys,
    task_operation,
    validate,
)
from tests.iam_policies import PolicyReader
from tests.synth import ROOT, synth_template

CORPUS = "s3://raw-bucket/pile/"
MIX_SOURCE = "s3://raw-bucket/fineweb-edu/"
# The Pile's 22 subsets as its documents' meta.pile_set_name has them (Gao et al. 2020, Table 1): 271 characters.
PILE_SUBSETS = (
    "Pile-CC", "PubMed Central", "Books3", "OpenWebText2", "ArXiv", "Github", "FreeLaw", "StackExchange",
    "USPTO Backgrounds", "PubMed Abstracts", "Gutenberg (PG-19)", "OpenSubtitles", "Wikipedia (en)",
    "DM Mathematics", "Ubuntu IRC", "BookCorpus2", "EuroParl", "HackerNews", "YoutubeSubtitles", "PhilPapers",
    "NIH ExPorter", "Enron Emails",
)  # fmt: skip


def docs_input(starts_with: str) -> dict:
    """A JSON block of a page under docs/ (the execution input's, model parallelism's), by its first characters."""
    text = "".join(page.read_text() for page in sorted(ROOT.joinpath("docs").glob("*.md")))
    blocks = text.split("```json\n")[1:]
    return json.loads(next(b.split("```")[0] for b in blocks if b.startswith(starts_with)))


INPUTS = {
    "default": {},
    "docs-full": docs_input('{\n  "corpus"'),
    "docs-pipeline": docs_input('{"training": {"model_preset": "gpt3-2.7b"'),
    "spot-off-s3-deploy": {"training": {"spot": False, "data_source": "s3"}, "deploy": True},
    "spot-on-efs-cpu-deploy": {
        "training": {"spot": True, "data_source": "efs", "instance_type": "ml.p3.16xlarge", "precision": "fp16",
                     "model_preset": "gpt3-125m", "micro_batch_size": 4},
        "deploy": {"enabled": True, "instance_type": "ml.m5.xlarge"},
        "preprocessing": {"instance_type": "ml.c5.9xlarge"},
    },
    "every-pile-subset": {"corpus": {"pile_set_names": ", ".join(PILE_SUBSETS)}},
    "mix": {"corpus": {"sources": [
        {"name": "pile", "s3_uri": CORPUS, "weight": 0.7, "pile_set_names": "Github, ArXiv"},
        {"name": "web-edu", "s3_uri": MIX_SOURCE, "weight": 0.3, "text_field": "content"},
    ]}},
}  # fmt: skip
EXECUTION_NAMES = ("first-run", "2026-12-01_Pile CC, run #7 (retry)/" + "x" * 60)


def corpus_store(tmp_path_factory) -> FolderStore:
    store = FolderStore(tmp_path_factory.mktemp("s3"))
    for i in range(8):
        store.put_text(f"{CORPUS}{i:02d}.jsonl.zst", "x")
        store.put_text(f"{MIX_SOURCE}{i:03d}_00000.parquet", "x")
    return store


def plans(tmp_path_factory) -> dict[str, dict]:
    result = {}
    for stage in ("dev", "prod"):
        settings = make_settings(stage)
        for input_name, overrides in INPUTS.items():
            for execution_name in EXECUTION_NAMES:
                store = corpus_store(tmp_path_factory)  # each plan its own: a run name names one run's shape
                corpus = overrides.get("corpus", {})
                raw = {
                    **copy.deepcopy(overrides),
                    "corpus": corpus if "sources" in corpus else {**corpus, "s3_uri": CORPUS},
                }
                key = f"{stage}/{input_name}/{execution_name[:12]}"
                result[key] = plan_execution(raw, execution_name, settings, store)
    return result


@pytest.fixture(scope="module")
def all_plans(tmp_path_factory) -> dict[str, dict]:
    return plans(tmp_path_factory)


def findings(plan: dict) -> list[str]:
    found = []
    for kind, request in plan["requests"].items():
        problems = validate("sagemaker", REQUEST_OPERATIONS[kind], request) + documented_rules(kind, request)
        found += [f"{kind}: {problem}" for problem in problems]
    return found


def test_every_request_of_every_plan_is_valid(all_plans: dict[str, dict]):
    assert len(all_plans) == 2 * len(INPUTS) * len(EXECUTION_NAMES)
    problems = {key: found for key, plan in all_plans.items() if (found := findings(plan))}
    assert problems == {}


FIELDS = {
    "tokenizer": processing_requests.PROCESSING_FIELDS,
    "shards": processing_requests.PROCESSING_FIELDS,
    "training": requests.TRAINING_FIELDS,
    "model": requests.MODEL_FIELDS,
    "endpoint_config": requests.ENDPOINT_CONFIG_FIELDS,
    "endpoint": requests.ENDPOINT_FIELDS,
}


def test_each_builder_returns_only_its_fields_and_they_are_the_operations_members(all_plans: dict[str, dict]):
    for kind, fields in FIELDS.items():
        assert set(fields) <= set(operation("sagemaker", REQUEST_OPERATIONS[kind]).input_shape.members), kind
        for plan in all_plans.values():
            assert set(plan["requests"][kind]) <= set(fields), kind


def preprocess_reads(plan: dict, kind: str, expression: str) -> str:
    """What ``expression`` of preprocess.py's ``args`` prints for the job's container arguments."""
    arguments = plan["requests"][kind]["AppSpecification"]["ContainerArguments"]
    program = (
        "import sys; from preprocess import build_parser, mix_sources; "
        f"args = build_parser().parse_args(sys.argv[1:]); print({expression})"
    )
    parsed = subprocess.run(
        [sys.executable, "-c", program, *arguments], cwd=ROOT / "training", capture_output=True, text=True, check=True
    )
    return parsed.stdout.strip()


def test_every_pile_subset_reaches_preprocess_pys_parser(all_plans: dict[str, dict]):
    plan = all_plans["dev/every-pile-subset/first-run"]
    for kind in ("tokenizer", "shards"):
        assert preprocess_reads(plan, kind, "sorted(args.pile_set_names)") == repr(sorted(PILE_SUBSETS)), kind


def test_a_mix_reaches_preprocess_pys_parser_source_by_source(all_plans: dict[str, dict]):
    plan = all_plans["dev/mix/first-run"]
    sources = "[(s.name, s.weight, s.text_field, sorted(s.pile_set_names)) for s in mix_sources(args)]"
    expected = [("pile", 0.7, "text", ["ArXiv", "Github"]), ("web-edu", 0.3, "content", [])]
    for kind in ("tokenizer", "shards"):
        assert preprocess_reads(plan, kind, sources) == repr(expected), kind
        request = plan["requests"][kind]
        inputs = {i["InputName"]: i["S3Input"]["LocalPath"] for i in request["ProcessingInputs"]}
        arguments = request["AppSpecification"]["ContainerArguments"]
        assert inputs["raw-web-edu"] == arguments[arguments.index("--input_dir") + 1] + "/web-edu"  # where it reads


def test_the_most_and_longest_names_the_plan_step_accepts_are_valid_requests(tmp_path):
    store = FolderStore(tmp_path)
    for i in range(8):
        store.put_text(f"{CORPUS}{i:02d}.jsonl.zst", "x")
    longest = aws_limits().container_argument_chars - len(PILE_SET_OPTION)
    names = ",".join(f"{i:02d}".ljust(longest, "x") for i in range(MAX_PILE_SET_NAMES))
    plan = plan_execution({"corpus": {"s3_uri": CORPUS, "pile_set_names": names}}, "most", make_settings("dev"), store)
    assert findings(plan) == []


def test_the_largest_mix_the_plan_step_accepts_is_a_valid_request(tmp_path):
    store = FolderStore(tmp_path)
    names = [f"source-{i}".ljust(32, "x") for i in range(MAX_SOURCES)]
    longest = aws_limits().container_argument_chars - len(f"{SOURCE_PILE_SET_OPTION}{names[0]}:")
    sources = []
    for i, name in enumerate(names):
        for k in range(2):  # the dev stage preprocesses on two instances
            store.put_text(f"s3://raw-bucket/{name}/{k}.jsonl.zst", "x")
        subsets = ",".join(f"{i}-{j}".ljust(longest, "x") for j in range(MAX_PILE_SET_NAMES // MAX_SOURCES))
        uri = f"s3://raw-bucket/{name}/"
        sources.append({"name": name, "s3_uri": uri, "weight": 1.5, "text_field": "t" * 128, "pile_set_names": subsets})
    plan = plan_execution({"corpus": {"sources": sources}}, "most", make_settings("dev"), store)
    arguments = plan["requests"]["shards"]["AppSpecification"]["ContainerArguments"]
    assert len(arguments) == 15 + 2 * MAX_SOURCES + MAX_PILE_SET_NAMES  # the job's own, --source and its field, subsets
    assert findings(plan) == []


def test_the_matrix_reaches_each_case(all_plans: dict[str, dict]):
    trainings = [p["requests"]["training"] for p in all_plans.values()]
    assert {t["EnableManagedSpotTraining"] for t in trainings} == {True, False}
    assert {"source_weights" in t["HyperParameters"] for t in trainings} == {True, False}  # a mix and none
    assert {next(iter(t["InputDataConfig"][0]["DataSource"])) for t in trainings} == {
        "FileSystemDataSource",
        "S3DataSource",
    }
    assert {"VolumeKmsKeyId" in t["ResourceConfig"] for t in trainings} == {True, False}
    assert {"KmsKeyId" in p["requests"]["endpoint_config"] for p in all_plans.values()} == {True, False}
    assert {p["deploy"] for p in all_plans.values()} == {True, False}


def test_the_request_checks_catch_seeded_defects(all_plans: dict[str, dict]):
    plan = copy.deepcopy(all_plans["dev/default/first-run"])
    training = plan["requests"]["training"]
    training["ResourceConfig"]["VolumeKmsKeyId"] = "arn:aws:kms:us-east-1:123456789012:key/k"  # on ml.g5.12xlarge
    training["TrainingJobName"] += "-" + "x" * 60  # past 63 characters
    training["HyperParameters"]["bad name"] = "v" * 2501
    training["StoppingCondition"]["MaxWaitTimeInSeconds"] = 1
    training["EnableManagedSpotTraining"] = True
    training["InputDataConfig"][0]["InputMode"] = "FastFile"  # EFS
    plan["requests"]["model"]["PrimaryContainer"]["Imag"] = plan["requests"]["model"]["PrimaryContainer"].pop("Image")
    found = "\n".join(findings(plan))
    for expected in (
        "ResourceConfig.VolumeKmsKeyId on ml.g5.12xlarge",
        "CreateTrainingJob.TrainingJobName: 89 characters, at most 63",
        "value at most 2,500",
        "MaxWaitTimeInSeconds must be at least",
        "must use File input mode",
        'Unknown parameter in PrimaryContainer: "Imag"',
    ):
        assert expected in found


def test_the_model_limit_checks_catch_seeded_defects(all_plans: dict[str, dict]):
    efs, s3 = (
        copy.deepcopy(all_plans[f"dev/{name}/first-run"]) for name in ("spot-on-efs-cpu-deploy", "spot-off-s3-deploy")
    )
    training = efs["requests"]["training"]
    training["AlgorithmSpecification"]["TrainingInputMode"] = "Fil"
    training["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"].update(
        FileSystemAccessMode="readonly", FileSystemType="EFSS"
    )
    training["ResourceConfig"]["InstanceType"] = "ml.g5.12xlargee"
    training["StoppingCondition"]["MaxRuntimeInSeconds"] = 0
    s3["requests"]["training"]["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3DataDistributionType"] = (
        "ShardedByS3Keys"
    )
    arguments = s3["requests"]["tokenizer"]["AppSpecification"]["ContainerArguments"]
    arguments.append(",".join(["Pile-CC"] * 34))  # one argument of 271 characters
    s3["requests"]["shards"]["AppSpecification"]["ContainerArguments"] = []
    found = "\n".join(findings(efs) + findings(s3))
    for expected in (
        "AlgorithmSpecification.TrainingInputMode: 'Fil' is not one of TrainingInputMode's 3 values",
        "FileSystemDataSource.FileSystemAccessMode: 'readonly' is not one of FileSystemAccessMode's 2 values",
        "FileSystemDataSource.FileSystemType: 'EFSS' is not one of FileSystemType's 2 values",
        "ResourceConfig.InstanceType: 'ml.g5.12xlargee' is not one of TrainingInstanceType's",
        "StoppingCondition.MaxRuntimeInSeconds: 0 is below 1",
        "S3DataSource.S3DataDistributionType: 'ShardedByS3Keys' is not one of S3DataDistribution's 2 values",
        f"AppSpecification.ContainerArguments[{len(arguments) - 1}]: 271 characters, at most 256",
        "AppSpecification.ContainerArguments: 0 items, at least 1",
    ):  # fmt: skip
        assert expected in found, f"{expected!r} not in:\n{found}"


def test_the_limit_checks_know_every_key_the_models_carry(definition: dict):
    """A key a later botocore adds (a new kind of limit) fails here until :func:`_limits` checks it or it is
    listed as one that limits nothing."""
    resources = [s["Resource"] for s in definition["States"].values() if s["Type"] == "Task"]
    services = {called[0] for called in map(task_operation, resources) if called}
    assert services == {"sagemaker", "datasync", "sns"}
    keys = {
        key
        for service in services
        for shape in SESSION.get_service_model(service)._shape_resolver._shape_map.values()
        for key in [*shape, *(k for member in shape.get("members", {}).values() for k in member)]
    }
    assert keys - CHECKED_KEYS - UNCONSTRAINING_KEYS == set()
    assert {"enum", "min", "max", "pattern"} <= keys  # the shapes were read


@pytest.fixture(scope="module")
def definition() -> dict:
    return resolve_definition(synth_template("dev"), "us-east-1", "123456789012")


def parameter_problems(definition: dict) -> list[str]:
    problems = []
    for name, state in definition["States"].items():
        if state["Type"] != "Task":
            continue
        if not (called := task_operation(state["Resource"])):
            continue
        service, op = called
        members = set(operation(service, op).input_shape.members)
        extra = static_parameter_keys(state.get("Parameters", {})) - members
        problems += [f"{name}: {key} is not a member of {service} {op}" for key in sorted(extra)]
        if "Parameters" not in state:  # a SageMaker state: the Plan step's request, whole
            assert state["InputPath"].startswith("$.plan.requests."), name
    return problems


def test_task_parameters_are_members_of_their_operations_input(definition: dict):
    tasks = [s for s in definition["States"].values() if s["Type"] == "Task"]
    assert len(tasks) >= 10
    assert parameter_problems(definition) == []


def test_the_parameters_check_catches_a_seeded_defect(definition: dict):
    broken = copy.deepcopy(definition)
    broken["States"]["StartDataSync"]["Parameters"]["Include"] = broken["States"]["StartDataSync"]["Parameters"].pop(
        "Includes"
    )
    assert parameter_problems(broken) == ["StartDataSync: Include is not a member of datasync StartTaskExecution"]


# What each call needs of its caller's role (Step Functions' IAM for the integrations, the API permissions
# reference); ``kms:CreateGrant`` because the endpoint configuration may name the data key.
STATE_MACHINE_NEEDS = {
    "sagemaker:createProcessingJob.sync": [
        "sagemaker:CreateProcessingJob",
        "sagemaker:DescribeProcessingJob",
        "sagemaker:StopProcessingJob",
        "sagemaker:AddTags",
        "iam:PassRole",
        "events:PutTargets",
        "events:PutRule",
        "events:DescribeRule",
    ],
    "sagemaker:createTrainingJob.sync": [
        "sagemaker:CreateTrainingJob",
        "sagemaker:DescribeTrainingJob",
        "sagemaker:StopTrainingJob",
        "sagemaker:AddTags",
        "iam:PassRole",
        "events:PutTargets",
        "events:PutRule",
        "events:DescribeRule",
    ],
    "sagemaker:createModel": ["sagemaker:CreateModel", "sagemaker:AddTags", "iam:PassRole"],
    "sagemaker:createEndpointConfig": ["sagemaker:CreateEndpointConfig", "sagemaker:AddTags"],
    "sagemaker:createEndpoint": ["sagemaker:CreateEndpoint", "sagemaker:AddTags", "kms:CreateGrant"],
    "aws-sdk:sagemaker:describeEndpoint": ["sagemaker:DescribeEndpoint"],
    "aws-sdk:datasync:startTaskExecution": ["datasync:StartTaskExecution"],
    "aws-sdk:datasync:describeTaskExecution": ["datasync:DescribeTaskExecution"],
    "sns:publish": ["sns:Publish"],
}


def granted(template: dict, holder: str) -> set[str]:
    return {a for s in PolicyReader(template).statements() if s.holder == holder for a in s.actions}


def aws_definition(template: dict) -> dict:
    """The definition as Step Functions runs it: a Lambda function's ``Arn`` resolved to a function ARN."""

    def name_of(logical_id: str, attribute: str | None) -> str:
        if attribute == "Arn" and template["Resources"][logical_id]["Type"] == "AWS::Lambda::Function":
            return f"arn:aws:lambda:us-east-1:123456789012:function:{logical_id}"
        return local_arn(logical_id, attribute)

    return resolve_definition(template, "us-east-1", "123456789012", name_of)


def missing_state_machine_iam(template: dict, definition: dict) -> list[str]:
    actions = granted(template, "Workflow/StateMachineRole")
    missing = []
    for name, state in definition["States"].items():
        if state["Type"] != "Task":
            continue
        resource = state["Resource"]
        if regex.fullmatch(r"arn:aws:lambda:[a-z0-9-]+:\d{12}:function:[\w-]+", resource):
            needs = ["lambda:InvokeFunction"]  # the function invoked directly
        elif (integration := resource.removeprefix("arn:aws:states:::")) in STATE_MACHINE_NEEDS:
            needs = STATE_MACHINE_NEEDS[integration]
        else:
            missing.append(f"{name}: {resource} is neither a function nor an integration STATE_MACHINE_NEEDS knows")
            continue
        missing += [f"{name}: {a}" for a in needs if a not in actions]
    return missing


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_state_machine_role_has_what_each_integration_needs(stage: str):
    template = synth_template(stage)
    definition = aws_definition(template)
    assert missing_state_machine_iam(template, definition) == []
    broken = json.loads(json.dumps(template).replace('"kms:CreateGrant"', '"kms:ListGrants"'))
    assert missing_state_machine_iam(broken, definition) == ["CreateEndpoint: kms:CreateGrant"]
    copies = copy.deepcopy(definition)
    copies["States"]["CopyObject"] = {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:s3:copyObject", "End": True}
    copies["States"]["Plan"]["Resource"] = local_arn("PlanFunction")  # neither a function ARN nor an integration
    assert missing_state_machine_iam(template, copies) == [
        "Plan: arn:aws:local:::PlanFunction is neither a function nor an integration STATE_MACHINE_NEEDS knows",
        "CopyObject: arn:aws:states:::aws-sdk:s3:copyObject is neither a function nor an integration "
        "STATE_MACHINE_NEEDS knows",
    ]


def test_the_jobs_role_may_list_every_bucket_a_processing_input_names():
    """The code input is an S3Prefix in the CDK assets bucket; the others are in the raw and datasets buckets."""
    statements = [
        s
        for s in PolicyReader(synth_template("dev")).statements()
        if s.holder == "SageMakerExecution/Role" and "s3:ListBucket" in s.actions
    ]
    listed = json.dumps([s.resources for s in statements])
    assert "cdk-hnb659fds-assets" in listed
    for bucket in ("Buckets/Raw", "Buckets/Datasets"):
        assert bucket in listed, bucket
