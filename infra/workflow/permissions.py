"""The state machine's IAM: what its .sync SageMaker integrations need, and why each wildcard is there."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk.aws_datasync import CfnTask

from infra.nag import acknowledge_wildcards, cfn_ref


def sagemaker_arn(job_prefix: str, kind: str) -> str:
    """The ARN pattern of this stack's SageMaker resources of ``kind`` (``training-job``, ``endpoint`` ...)."""
    return f"arn:{cdk.Aws.PARTITION}:sagemaker:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:{kind}/{job_prefix}-*"


def grant_sagemaker_jobs(
    role: iam.IRole,
    *,
    job_prefix: str,
    execution_role_arn: str,
    key: kms.IKey,
    datasync_task: CfnTask,
    plan_function: lambda_.IFunction,
) -> None:
    """What the .sync SageMaker integrations need, scoped to this stack's job names and role; the wildcards of
    the grants CDK adds (X-Ray, log delivery, DataSync executions, Lambda versions) acknowledged."""
    jobs = [sagemaker_arn(job_prefix, kind) for kind in ("processing-job", "training-job")]
    hosting = [sagemaker_arn(job_prefix, kind) for kind in ("model", "endpoint-config", "endpoint")]
    statements = [
        iam.PolicyStatement(
            actions=[
                "sagemaker:CreateProcessingJob",
                "sagemaker:DescribeProcessingJob",
                "sagemaker:StopProcessingJob",
                "sagemaker:CreateTrainingJob",
                "sagemaker:DescribeTrainingJob",
                "sagemaker:StopTrainingJob",
                "sagemaker:AddTags",
                "sagemaker:ListTags",
            ],
            resources=jobs,
        ),
        iam.PolicyStatement(
            actions=[
                "sagemaker:CreateModel",
                "sagemaker:CreateEndpointConfig",
                "sagemaker:CreateEndpoint",
                "sagemaker:UpdateEndpoint",
                "sagemaker:DescribeEndpoint",
                "sagemaker:AddTags",
            ],
            resources=hosting,
        ),
        # CreateEndpoint or UpdateEndpoint with an endpoint configuration that names the data key: SageMaker creates
        # a grant on it for the endpoint's volumes, as the caller. Only through SageMaker, only for AWS resources.
        iam.PolicyStatement(
            actions=["kms:CreateGrant"],
            resources=[key.key_arn],
            conditions={
                "Bool": {"kms:GrantIsForAWSResource": "true"},
                "StringEquals": {"kms:ViaService": f"sagemaker.{cdk.Aws.REGION}.amazonaws.com"},
            },
        ),
        iam.PolicyStatement(
            actions=["iam:PassRole"],
            resources=[execution_role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
        ),
        iam.PolicyStatement(
            actions=["events:PutTargets", "events:PutRule", "events:DescribeRule"],
            resources=[
                f"arn:{cdk.Aws.PARTITION}:events:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:rule/StepFunctionsGetEventsForSageMaker{kind}JobsRule"
                for kind in ("Training", "Processing")
            ],
        ),
    ]
    for statement in statements:
        role.add_to_principal_policy(statement)
    _acknowledge(role, job_prefix, datasync_task, plan_function)


def _acknowledge(role: iam.IRole, job_prefix: str, datasync_task: CfnTask, plan_function: lambda_.IFunction) -> None:
    arn = "arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>"
    reasons = {
        f"Resource::{arn}:{kind}/{job_prefix}-*": (
            "Job and endpoint names are derived per execution; access is limited to this stack's name prefix."
        )
        for kind in ("processing-job", "training-job", "model", "endpoint-config", "endpoint")
    }
    reasons["Resource::*"] = (
        "X-Ray tracing (xray:PutTraceSegments, PutTelemetryRecords, GetSampling*) and CloudWatch Logs delivery "
        "(logs:*LogDelivery*, Describe*) have no resource-level permissions."
    )
    reasons[f"Resource::{cfn_ref(datasync_task, 'TaskArn')}/execution/*"] = (
        "DataSync names task executions at start; access is limited to executions of this stack's task."
    )
    reasons[f"Resource::{cfn_ref(plan_function)}:*"] = (
        "Invoking any version of the Plan function (CDK's LambdaInvoke grant)."
    )
    acknowledge_wildcards(role, reasons)
