"""The EFS file system that training reads the token shards from."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Size
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_kms as kms
from constructs import Construct, DependencyGroup, IDependable

from infra.config import StorageConfig
from infra.nag import acknowledge_compliance

DATASETS_PATH = "/datasets"
NOT_BACKED_UP = (
    "The file system is a cache: it holds only copies of datasets that DataSync stages from the datasets bucket "
    "(versioned, encrypted, retained with the data) again on demand, so a backup would pay to keep a second copy of "
    "what the bucket already keeps. EFS automatic backups are off too."
)
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
        config: throughput mode and removal policy. No stage backs the file system up: it is a cache of the
            datasets bucket (versioned, retained), which DataSync stages into it again on demand. With
            ``existing.file_system_id`` the retained file system is adopted as it is and given mount targets
            (the destroyed stack deleted its own with its VPC).

    Attributes:
        mount_targets_available: what a resource that needs the mount targets depends on.
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
        self.security_group.add_ingress_rule(clients, ec2.Port.tcp(2049), "NFS from SageMaker jobs")
        self.mount_targets_available: IDependable
        existing = config.existing.file_system_id
        self.file_system = self._adopt(existing, vpc, subnets) if existing else self._create(vpc, subnets, key, config)
        if not existing:
            acknowledge_compliance(
                self.file_system, {"EFSInBackupPlan": NOT_BACKED_UP}, packs=("NIST80053R5", "HIPAASecurity")
            )
        # DataSync writes the dataset through this access point; training reads the same directory.
        access = {"path": DATASETS_PATH, "create_acl": efs.Acl(owner_uid="0", owner_gid="0", permissions="755")}
        self.datasets_access_point = (
            efs.AccessPoint(self, "Datasets", file_system=self.file_system, **access)
            if existing
            else self.file_system.add_access_point("Datasets", **access)
        )

    def _adopt(self, file_system_id: str, vpc: ec2.IVpc, subnets: ec2.SubnetSelection) -> efs.IFileSystem:
        file_system = efs.FileSystem.from_file_system_attributes(
            self, "FileSystem", file_system_id=file_system_id, security_group=self.security_group
        )
        targets = [
            efs.CfnMountTarget(
                self,
                f"MountTarget{i}",
                file_system_id=file_system_id,
                subnet_id=subnet.subnet_id,
                security_groups=[self.security_group.security_group_id],
            )
            for i, subnet in enumerate(vpc.select_subnets(**subnets._values).subnets)
        ]
        self.mount_targets_available = DependencyGroup(*targets)
        return file_system

    def _create(
        self, vpc: ec2.IVpc, subnets: ec2.SubnetSelection, key: kms.IKey, config: StorageConfig
    ) -> efs.FileSystem:
        provisioned = config.efs_throughput_mode == "provisioned"
        file_system = efs.FileSystem(
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
            # A dataset no job read for 14 days moves to Infrequent Access (about 5% of Standard's price per GB);
            # the first read of a file brings it back.
            lifecycle_policy=efs.LifecyclePolicy.AFTER_14_DAYS,
            out_of_infrequent_access_policy=efs.OutOfInfrequentAccessPolicy.AFTER_1_ACCESS,
            # SageMaker mounts EFS channels over plain NFS without IAM authentication; a file system policy
            # that requires IAM would make every training job fail to mount. Access is enforced by the
            # security group above, and the channel is mounted read-only.
            allow_anonymous_access=True,
            removal_policy=RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY,
        )
        # Said, not left out: a stage first deployed with automatic backups on (dev, before) gets them turned off
        # by the update, rather than depending on what an unspecified BackupPolicy means on update.
        cfn = file_system.node.default_child
        cfn.backup_policy = efs.CfnFileSystem.BackupPolicyProperty(status="DISABLED")
        self.mount_targets_available = file_system.mount_targets_available
        return file_system
