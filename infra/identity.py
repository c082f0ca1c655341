"""The IAM role SageMaker jobs run as, with access to this stack's resources and nothing else."""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Aws, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.images import repository_arn
from infra.nag import acknowledge_wildcards, bucket_ref

# Why the job network interfaces' statements name every resource of a kind (cdk-nag IAM5).
NETWORK_INTERFACE_REASONS = {
    "network-interface": "SageMaker creates the job's interfaces (their ids are not known before) and deletes them; "
    "creating one also needs the subnet and security group, allowed only in this VPC, and the other actions are "
    "limited to this VPC's interfaces by the ec2:Vpc condition.",
    **dict.fromkeys(
        ("subnet", "security-group"),
        "The subnet and security groups of a job's new interface: any of this VPC's (ec2:Vpc condition); the "
        "job's request names the stage's job subnets and the jobs' security group.",
    ),
}


def source_keys_statement(key_arns: Iterable[str]) -> iam.PolicyStatement:
    """Decrypt objects of the source buckets encrypted with keys of their own (``source_bucket_keys``), through S3
    only: the jobs' role and the Plan function read them."""
    s3_only = {"StringEquals": {"kms:ViaService": f"s3.{Aws.REGION}.amazonaws.com"}}
    return iam.PolicyStatement(actions=["kms:Decrypt"], resources=list(key_arns), conditions=s3_only)


class SageMakerExecutionRole(Construct):
    """The execution role of the processing, training and hosting jobs.

    Grants: read of the raw bucket and the stage's source buckets; read/write of the datasets, checkpoints
    and models buckets; the data key for those; NFS mount of the file system; the job network interfaces in
    this VPC; pulls from the repositories of the jobs' images; the SageMaker log groups and metric namespaces.

    Args:
        read_buckets, write_buckets: buckets the jobs read, and read and write.
        key: the data KMS key.
        source_keys: ARNs of the KMS keys the source buckets' objects are encrypted with, decrypted through S3.
        file_system: the dataset file system.
        vpc: the VPC where jobs create their network interfaces.
        images: the jobs' image URIs (their ECR repositories may be pulled from).
        job_prefix: how the stack's jobs, models and endpoints are named; only they may assume the role.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        read_buckets: list[s3.IBucket],
        write_buckets: list[s3.IBucket],
        key: kms.IKey,
        source_keys: Iterable[str],
        file_system: efs.IFileSystem,
        vpc: ec2.IVpc,
        images: Iterable[str],
        job_prefix: str,
    ) -> None:
        super().__init__(scope, id)
        self.role = self._role(job_prefix)
        self.policy = iam.Policy(self, "Policy", roles=[self.role])
        self._allow_buckets([*read_buckets, *write_buckets], write_buckets)
        self._allow_key(key)
        if source_keys := list(source_keys):
            self.policy.add_statements(source_keys_statement(source_keys))
        self._allow_file_system(file_system)
        self._allow_network_interfaces(vpc)
        self._allow_images(images)
        self._allow_logs_and_metrics()
        self._acknowledge_wildcards([*read_buckets, *write_buckets], write_buckets)

    def _role(self, job_prefix: str) -> iam.Role:
        """Assumed by SageMaker for this stack's jobs, models and endpoints only (their names start with the job
        prefix; SageMaker's ARNs are lower-case, as the prefix is): the keys of SageMaker's "Cross-service confused
        deputy prevention"."""
        stack = Stack.of(self)
        ours = f"arn:{stack.partition}:sagemaker:{stack.region}:{stack.account}:*/{job_prefix}-*"
        return iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "sagemaker.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}, "ArnLike": {"aws:SourceArn": ours}},
            ),
            description="SageMaker jobs of the GPT pre-training workflow",
        )

    def _allow_buckets(self, buckets: list[s3.IBucket], write_buckets: list[s3.IBucket]) -> None:
        """List and read every bucket; write, delete and abort uploads in the write buckets."""
        self.policy.add_statements(
            iam.PolicyStatement(
                actions=["s3:ListBucket", "s3:GetBucketLocation"], resources=[b.bucket_arn for b in buckets]
            )
        )
        self.policy.add_statements(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[b.arn_for_objects("*") for b in buckets])
        )
        self.policy.add_statements(
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
                resources=[b.arn_for_objects("*") for b in write_buckets],
            )
        )

    def _allow_key(self, key: kms.IKey) -> None:
        """Encrypt and decrypt with the data key; grants on it for the jobs' volumes."""
        self.policy.add_statements(
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                resources=[key.key_arn],
            )
        )
        # SageMaker creates grants on the key for the job's volumes. Only for AWS resources: code in a job may not
        # grant the data key to another principal.
        self.policy.add_statements(
            iam.PolicyStatement(
                actions=["kms:CreateGrant"],
                resources=[key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
            )
        )

    def _allow_file_system(self, file_system: efs.IFileSystem) -> None:
        """Mount and write the dataset file system."""
        self.policy.add_statements(
            iam.PolicyStatement(
                actions=[
                    "elasticfilesystem:ClientMount",
                    "elasticfilesystem:ClientWrite",
                    "elasticfilesystem:DescribeMountTargets",
                ],
                resources=[file_system.file_system_arn],
            )
        )

    def _allow_network_interfaces(self, vpc: ec2.IVpc) -> None:
        """The job network interfaces, in this VPC only."""
        # Jobs in a VPC: SageMaker creates and deletes network interfaces in the job subnets.
        self.policy.add_statements(
            iam.PolicyStatement(
                actions=[
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeVpcs",
                    "ec2:DescribeDhcpOptions",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeSecurityGroups",
                ],
                resources=["*"],  # Describe* actions support no resource-level permissions
            )
        )
        # IAM authorizes CreateNetworkInterface on each resource it touches: the new interface, which has no
        # ec2:Vpc key yet (the Service Authorization Reference lists none for it), and the subnet and security
        # groups, which do. The VPC condition goes on those; an interface alone lands in no subnet.
        in_vpc = {"ArnEquals": {"ec2:Vpc": vpc.vpc_arn}}
        interfaces = self._ec2_arn("network-interface")
        self.policy.add_statements(
            iam.PolicyStatement(actions=["ec2:CreateNetworkInterface"], resources=[interfaces]),
            iam.PolicyStatement(
                actions=["ec2:CreateNetworkInterface"],
                resources=[self._ec2_arn("subnet"), self._ec2_arn("security-group")],
                conditions=in_vpc,
            ),
            iam.PolicyStatement(
                actions=[
                    "ec2:CreateNetworkInterfacePermission",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DeleteNetworkInterfacePermission",
                ],
                resources=[interfaces],
                conditions=in_vpc,
            ),
        )

    def _ec2_arn(self, kind: str) -> str:
        """Every EC2 resource of ``kind`` in this account and region."""
        return f"arn:aws:ec2:{Stack.of(self).region}:{Stack.of(self).account}:{kind}/*"

    def _allow_images(self, images: Iterable[str]) -> None:
        """Pull the jobs' images."""
        self.policy.add_statements(
            iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"])
        )  # account-wide action
        self.policy.add_statements(
            iam.PolicyStatement(
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=sorted({repository_arn(uri) for uri in images}),
            )
        )

    def _allow_logs_and_metrics(self) -> None:
        """SageMaker's log groups and metric namespaces."""
        self.policy.add_statements(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[
                    f"arn:aws:logs:{Stack.of(self).region}:{Stack.of(self).account}:log-group:{group}"
                    for group in (
                        "/aws/sagemaker/TrainingJobs:*",
                        "/aws/sagemaker/ProcessingJobs:*",
                        "/aws/sagemaker/Endpoints/*",
                    )
                ],
            )
        )
        self.policy.add_statements(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],  # PutMetricData has no resource-level permissions
                conditions={"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}},
            )
        )

    def allow_image(self, image_uri: str) -> None:
        """Pulls from the repository of the stage's custom training image (``training.image_uri``)."""
        self.policy.add_statements(
            iam.PolicyStatement(
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=[repository_arn(image_uri)],
            )
        )

    def _acknowledge_wildcards(self, buckets: list[s3.IBucket], write_buckets: list[s3.IBucket]) -> None:
        """Each wildcard above, with the reason it is as narrow as IAM allows."""
        stack = Stack.of(self)
        reasons = {
            "Resource::*": "Only actions without resource-level permissions use '*': ec2:Describe*, "
            "ecr:GetAuthorizationToken, cloudwatch:PutMetricData (limited to the /aws/sagemaker/* namespaces).",
            **{f"Resource::{self._ec2_arn(kind)}": reason for kind, reason in NETWORK_INTERFACE_REASONS.items()},
        }
        for bucket in buckets:
            access = "read and write" if bucket in write_buckets else "read"
            reasons[f"Resource::{bucket_ref(bucket)}/*"] = (
                f"Jobs {access} objects under any key of this bucket (the stack's own, or a source bucket the stage "
                "lists); keys are chosen per execution."
            )
        for group in ("TrainingJobs:*", "ProcessingJobs:*", "Endpoints/*"):
            arn = f"arn:aws:logs:{stack.region}:{stack.account}:log-group:/aws/sagemaker/{group}"
            reasons[f"Resource::{arn}"] = (
                "SageMaker names log streams per job and endpoint; this is the log group SageMaker writes to."
            )
        acknowledge_wildcards(self.policy, reasons)
