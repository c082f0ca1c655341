"""The Plan step's Lambda function: the ``infra/plan_step`` folder and the infra modules it shares, nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.aws_limits import LIMITS_FILE, write_limits
from infra.checkov import skip_checks
from infra.identity import source_keys_statement
from infra.nag import acknowledge_compliance, acknowledge_wildcards, bucket_ref, cfn_ref
from infra.plan_step.settings import SETTINGS_ENV, SETTINGS_FILE, split_settings
from infra.source_bundle import BUILD_DIR, REPO_ROOT
from infra.training_code import SHARED_FILES, TRAINING_ROOT

RUNTIME_PACKAGE = "infra/plan_step/"
HANDLER = "infra.plan_step.plan.handler"
# infra's standard-library modules the run-time package imports (a folder: its modules), bundled beside it.
SHARED_INFRA = (
    "infra/__init__.py",
    "infra/aws_limits.py",
    "infra/config/",
    "infra/estimate/",
    "infra/images.py",
    "infra/instances.py",
    "infra/training_code.py",
)
# Why the function has no DLQ and no VPC (checkov CKV_AWS_116, CKV_AWS_117; cdk-nag LambdaDLQ, LambdaInsideVPC).
NO_DLQ = (
    "Invoked synchronously by the state machine (RequestResponse), which retries and catches its errors; a DLQ "
    "receives only failed asynchronous invocations, and there are none."
)
NOT_IN_VPC = (
    "It calls only S3 (ListBucket, GetObject of *.json objects and one byte of a corpus file, PutObject under "
    "inputs/, DeleteObject under "
    "datasets/) and Service Quotas (two "
    "List actions); in a VPC it would need ENI permissions on '*', and an isolated stage an endpoint for each."
)
# What it reads of Service Quotas: the account's SageMaker quotas, applied and default (infra/plan_step/quotas.py).
QUOTA_ACTIONS = ["servicequotas:ListServiceQuotas", "servicequotas:ListAWSDefaultServiceQuotas"]
UNRESERVED = (
    "security.plan_reserved_concurrency is 0 (the default): a reservation fails deployment in any account whose "
    "unreserved concurrency would drop below Lambda's minimum of 10, and new accounts start with a quota as low "
    "as 10. The state machine retries throttled invocations. One invocation per execution "
    "start; only the state machine's role may invoke it."
)


def bundled_files() -> list[Path]:
    """The bundle's files, relative to the repository: the run-time package's modules and ``SHARED_INFRA``'s."""
    files = [Path(f) for f in SHARED_INFRA if not f.endswith("/")]
    for folder in [RUNTIME_PACKAGE, *(f for f in SHARED_INFRA if f.endswith("/"))]:
        modules = (REPO_ROOT / folder).glob("*.py")
        files += [
            m.relative_to(REPO_ROOT) for m in modules if not m.name.endswith("_test.py") and m.name != "conftest.py"
        ]
    return sorted(files)


def build_plan_code(bundled_settings: dict, out_dir: Path = BUILD_DIR / "plan_function") -> Path:
    """Copies the bundled files and the training package's shared files they load, in the repo's layout, and
    writes the AWS limits the run-time code checks (from botocore, ``infra/aws_limits.py``) and the settings
    known at synth (``SETTINGS_FILE``)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    shared = [(TRAINING_ROOT / name).relative_to(REPO_ROOT) for name in SHARED_FILES]
    for module in [*bundled_files(), *shared]:
        target = out_dir / module
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / module, target)
    write_limits(out_dir / LIMITS_FILE.relative_to(REPO_ROOT))
    (out_dir / SETTINGS_FILE).write_text(json.dumps(bundled_settings, indent=1, sort_keys=True))
    return out_dir


class PlanFunction(Construct):
    """Validates the execution input, derives job names and builds the SageMaker requests.

    Args:
        settings: a :class:`~infra.plan_step.settings.StackSettings` as a JSON-serializable dict; its
            deploy-time fields (tokens allowed) go into the environment, the others into the bundle.
        log_group: the function's log group (encrypted, with retention).
        datasets: the datasets bucket, where it reads manifests and tokenizers and writes the tokenizer's sample list.
        raw: the raw bucket, whose corpus files it lists.
        models: the models bucket, where it finds the model of a ``deploy_from`` training job (listing only).
        sources: the stage's other buckets of corpora and tokenizers (``source_buckets``), listed like the raw one.
        source_keys: the KMS keys of those buckets' objects (``source_bucket_keys``), decrypted through S3.
        key: the data key (objects it writes are encrypted with it).
        reserved_concurrency: concurrent executions reserved for it, and its cap (0: unreserved, acknowledged).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        settings: dict,
        log_group: logs.ILogGroup,
        datasets: s3.IBucket,
        raw: s3.IBucket,
        models: s3.IBucket,
        sources: list[s3.IBucket],
        source_keys: list[str],
        key: kms.IKey,
        reserved_concurrency: int,
    ) -> None:
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        environment, bundled = split_settings(settings)
        if cdk.Token.is_unresolved(json.dumps(bundled)):
            raise ValueError(f"settings known only at deployment belong in DEPLOY_TIME_FIELDS: {bundled}")
        code = build_plan_code(bundled, BUILD_DIR / "plan_function" / stack.stack_name)
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        self.role = role  # another account's source bucket admits it in its policy (the PlanRoleArn output)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler=HANDLER,
            code=lambda_.Code.from_asset(str(code)),
            timeout=cdk.Duration.minutes(1),
            memory_size=512,
            reserved_concurrent_executions=reserved_concurrency or None,
            role=role,
            log_group=log_group,
            tracing=lambda_.Tracing.ACTIVE,
            environment={SETTINGS_ENV: stack.to_json_string(environment)},
            environment_encryption=key,
            description="Plan step of the GPT pre-training workflow",
        )
        log_group.grant_write(role)
        # It lists (manifests, tokenizers, corpus files), reads JSON objects of the datasets bucket (a dataset's
        # manifests and the tokenizer it compares them with), reads the first byte of one file of each corpus source
        # (as the jobs will read it: sources.check_corpus_readable) and writes the tokenizer's sample list and the
        # record of what a dataset is made from.
        corpora = [raw, *sources]
        listed = [datasets, *corpora, models]
        role.add_to_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[b.bucket_arn for b in listed]))
        role.add_to_policy(iam.PolicyStatement(actions=QUOTA_ACTIONS, resources=["*"]))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[datasets.arn_for_objects("*.json"), *(b.arn_for_objects("*") for b in corpora)],
            )
        )
        if source_keys:
            role.add_to_policy(source_keys_statement(source_keys))
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[datasets.arn_for_objects("inputs/*")])
        )
        # A dataset made anew starts from an empty folder (a rerun with fewer hosts would keep the others' shards).
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:DeleteObject"], resources=[datasets.arn_for_objects("datasets/*")])
        )
        # The object it writes is encrypted with the data key, by S3 on its behalf.
        s3_only = {"StringEquals": {"kms:ViaService": f"s3.{stack.region}.amazonaws.com"}}
        role.add_to_policy(
            iam.PolicyStatement(actions=["kms:GenerateDataKey"], resources=[key.key_arn], conditions=s3_only)
        )
        # Lambda decrypts the environment (encrypted with the data key) with the function's role at cold start, and
        # S3 decrypts the JSON objects it reads (manifests, tokenizers) with it.
        role.add_to_policy(iam.PolicyStatement(actions=["kms:Decrypt"], resources=[key.key_arn]))
        skip_checks(
            self.function,
            {"CKV_AWS_116": NO_DLQ, "CKV_AWS_117": NOT_IN_VPC}
            | ({} if reserved_concurrency else {"CKV_AWS_115": UNRESERVED}),
        )
        acknowledge_compliance(self.function, {"LambdaInsideVPC": NOT_IN_VPC})
        acknowledge_compliance(
            self.function,
            {"LambdaDLQ": NO_DLQ} | ({} if reserved_concurrency else {"LambdaConcurrency": UNRESERVED}),
            packs=("NIST80053R5", "HIPAASecurity"),
        )
        acknowledge_wildcards(
            role,
            {
                "Resource::*": (
                    "X-Ray's PutTraceSegments and PutTelemetryRecords, and Service Quotas' ListServiceQuotas and "
                    "ListAWSDefaultServiceQuotas (read-only), have no resource-level permission."
                ),
                f"Resource::{bucket_ref(datasets)}/datasets/*": (
                    "It deletes only under datasets/, the folder of the dataset it is about to make anew (versioning "
                    "keeps the objects as noncurrent versions for 7 days)."
                ),
                f"Resource::{bucket_ref(datasets)}/inputs/*": (
                    "The function writes under inputs/ only: the tokenizer's sample list (its key contains the "
                    "execution's job name) and the record of what a dataset is made from (its key, the dataset's)."
                ),
                f"Resource::{bucket_ref(datasets)}/*.json": (
                    "It reads JSON objects only (manifests, tokenizer.json) to compare an existing dataset with "
                    "the request; keys are chosen per dataset and execution."
                ),
                **{
                    f"Resource::{bucket_ref(b)}/*": (
                        "Corpus files are named by each execution's input; it reads a given tokenizer.json and the "
                        "first byte of one file of each source, to refuse a corpus the jobs could not read before "
                        "any job starts. The buckets are read-only to it."
                    )
                    for b in corpora
                },
                f"Resource::{cfn_ref(log_group)}:*": (
                    "Lambda names log streams per instance; writes are limited to the function's own log group."
                ),
            },
        )
