"""The EFS file system that training reads the token shards from."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Size
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.config import StorageConfig

DATASETS_PATH = "/datasets"
THROUGHPUT_MODES = {
    "elastic": efs.ThroughputMode.ELASTIC,
    "bursting": efs.ThroughputMode.BURSTING,
    "provisioned": efs.ThroughputMode.PROVISIONED,
}


class DatasetFileSystem(Construct):
    """Encrypted EFS with mount targets in the jobs' subnets, reachable over NFS only from the jobs.

    Args:
        vpc, subnets: where the mount targets go (the jobs' private subnets).
        clients: the security group whose members may mount (NFS, TCP 2049).
        key: the KMS key for encryption at rest.
        config: throughput mode and removal policy.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        clients: ec2.ISecurityGroup,
        key: kms.IKey,
        config: StorageConfig,
    ) -> None:
        super().__init__(scope, id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="EFS mount targets: NFS from the jobs only",
            allow_all_outbound=False,
        )
        self.security_group.add_ingress_rule(clients, ec2.Port.tcp(2049), "NFS from SageMaker jobs and DataSync")
        provisioned = config.efs_throughput_mode == "provisioned"
        self.file_system = efs.FileSystem(
            self,
            "FileSystem",
            vpc=vpc,
            vpc_subnets=subnets,
            security_group=self.security_group,
            encrypted=True,
            kms_key=key,
            performance_mode=efs.PerformanceMode.GENERAL_PURPOSE,
            throughput_mode=THROUGHPUT_MODES[config.efs_throughput_mode],
            provisioned_throughput_per_second=Size.mebibytes(config.efs_provisioned_mibps) if provisioned else None,
            enable_automatic_backups=True,
            # SageMaker mounts EFS channels over plain NFS without IAM authentication; a file system policy
            # that requires IAM would make every training job fail to mount. Access is enforced by the
            # security group above, and the channel is mounted read-only.
            allow_anonymous_access=True,
            removal_policy=RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY,
        )
        # DataSync writes the dataset through this access point; training reads the same directory.
        self.datasets_access_point = self.file_system.add_access_point(
            "Datasets",
            path=DATASETS_PATH,
            create_acl=efs.Acl(owner_uid="0", owner_gid="0", permissions="755"),
        )
