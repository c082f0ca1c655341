"""The DataSync task that copies a preprocessed dataset from S3 to EFS.

SageMaker Processing jobs cannot write to EFS, so the token shards land in the datasets bucket and
DataSync copies the one dataset an execution needs (an include filter chosen at start) to the file system.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_datasync as datasync
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct, IDependable

from infra.nag import acknowledge_wildcards, bucket_ref


class DatasetSync(Construct):
    """S3 ``datasets/`` -> EFS ``/datasets`` (through the file system's access point, over TLS).

    Args:
        bucket: the datasets bucket; the task reads its ``datasets/`` prefix.
        key: the bucket's KMS key.
        file_system, access_point: the destination.
        mount_targets: the file system's mount targets, which the destination location waits for.
        vpc, subnet: a subnet with a mount target, where DataSync places its network interface, in a group of
            its own that may reach the file system's mount targets over NFS and nothing else.
        log_group: where the task logs each file it transfers and verifies, and each error (log level TRANSFER).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        bucket: s3.IBucket,
        key: kms.IKey,
        file_system: efs.IFileSystem,
        access_point: efs.IAccessPoint,
        mount_targets: IDependable,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        log_group: logs.ILogGroup,
    ) -> None:
        super().__init__(scope, id)
        self._stack = cdk.Stack.of(self)
        security_group = self._security_group(vpc, file_system)
        bucket_role = self._bucket_role(bucket, key)
        efs_role = self._file_system_role(file_system)
        source = self._source(bucket, bucket_role)
        destination = self._destination(file_system, access_point, efs_role, subnet, security_group)
        # Creating a location tests access at once: CreateLocationEfs fails with "No valid mount targets" until
        # the mount targets are available (aws/aws-cdk#16826), and either location fails until its role's
        # policy exists. CloudFormation orders resources only by references and DependsOn.
        destination.node.add_dependency(mount_targets, efs_role)
        source.node.add_dependency(bucket_role)
        self.task = self._task(source, destination, log_group)
        self.task.node.add_dependency(self._admit_logs(log_group))  # its first execution may log at once

    def _principal(self) -> iam.ServicePrincipal:
        """DataSync of this account and region only: the keys DataSync's user guide gives for the roles of its
        locations (its example's aws:SourceArn is the region's and account's DataSync ARNs: the location that
        assumes a role is created with it, so its ARN cannot be named here)."""
        stack = self._stack
        return iam.ServicePrincipal(
            "datasync.amazonaws.com",
            conditions={
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:datasync:{stack.region}:{stack.account}:*"},
            },
        )

    def _security_group(self, vpc: ec2.IVpc, file_system: efs.IFileSystem) -> ec2.SecurityGroup:
        """DataSync's network interface: NFS to the file system's mount targets and nothing else."""
        security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="DataSync: NFS to the file system only",
            allow_all_outbound=False,
        )
        file_system.connections.allow_default_port_from(security_group, "NFS from DataSync")
        return security_group

    def _bucket_role(self, bucket: s3.IBucket, key: kms.IKey) -> iam.Role:
        """Reads ``datasets/`` of the bucket, decrypting through S3 only."""
        bucket_role = iam.Role(self, "BucketAccessRole", assumed_by=self._principal())
        # What DataSync needs of a source S3 location (DataSync user guide, "S3 location permissions").
        bucket_role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketMultipartUploads"],
                resources=[bucket.bucket_arn],
            )
        )
        bucket_role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:GetObjectTagging", "s3:GetObjectVersion", "s3:GetObjectVersionTagging"],
                resources=[bucket.arn_for_objects("datasets/*")],
            )
        )
        # S3 decrypts the objects with the data key on the role's behalf; the role may use the key for nothing else.
        bucket_role.add_to_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt"],
                resources=[key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"s3.{self._stack.region}.amazonaws.com"}},
            )
        )
        acknowledge_wildcards(
            bucket_role,
            {
                f"Resource::{bucket_ref(bucket)}/datasets/*": (
                    "DataSync reads every object under the datasets/ prefix; the include filter of each start "
                    "narrows it to one dataset."
                ),
            },
        )
        return bucket_role

    def _file_system_role(self, file_system: efs.IFileSystem) -> iam.Role:
        """Mounts and writes the file system."""
        efs_role = iam.Role(self, "FileSystemAccessRole", assumed_by=self._principal())
        efs_role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "elasticfilesystem:ClientMount",
                    "elasticfilesystem:ClientWrite",
                    "elasticfilesystem:ClientRootAccess",
                ],
                resources=[file_system.file_system_arn],
            )
        )
        return efs_role

    def _source(self, bucket: s3.IBucket, role: iam.IRole) -> datasync.CfnLocationS3:
        return datasync.CfnLocationS3(
            self,
            "Source",
            s3_bucket_arn=bucket.bucket_arn,
            subdirectory="/datasets/",
            s3_config=datasync.CfnLocationS3.S3ConfigProperty(bucket_access_role_arn=role.role_arn),
        )

    def _destination(
        self,
        file_system: efs.IFileSystem,
        access_point: efs.IAccessPoint,
        role: iam.IRole,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
    ) -> datasync.CfnLocationEFS:
        return datasync.CfnLocationEFS(
            self,
            "Destination",
            efs_filesystem_arn=file_system.file_system_arn,
            access_point_arn=access_point.access_point_arn,
            file_system_access_role_arn=role.role_arn,
            in_transit_encryption="TLS1_2",
            ec2_config=datasync.CfnLocationEFS.Ec2ConfigProperty(
                subnet_arn=f"arn:aws:ec2:{self._stack.region}:{self._stack.account}:subnet/{subnet.subnet_id}",
                security_group_arns=[
                    f"arn:aws:ec2:{self._stack.region}:{self._stack.account}:security-group/{security_group.security_group_id}"
                ],
            ),
        )

    def _task(
        self, source: datasync.CfnLocationS3, destination: datasync.CfnLocationEFS, log_group: logs.ILogGroup
    ) -> datasync.CfnTask:
        """Copies what changed, verifies it, deletes what the source no longer has (a dataset made anew leaves no
        earlier run's shard on EFS); no POSIX metadata. Logs each file and each error: a failed verify names the
        file, not only an error code."""
        return datasync.CfnTask(
            self,
            "Task",
            name=f"{self._stack.stack_name}-datasets-to-efs",
            source_location_arn=source.attr_location_arn,
            destination_location_arn=destination.attr_location_arn,
            cloud_watch_log_group_arn=log_group.log_group_arn,
            options=datasync.CfnTask.OptionsProperty(
                log_level="TRANSFER",
                verify_mode="ONLY_FILES_TRANSFERRED",
                overwrite_mode="ALWAYS",
                transfer_mode="CHANGED",
                preserve_deleted_files="REMOVE",
                posix_permissions="NONE",
                uid="NONE",
                gid="NONE",
            ),
        )

    def _admit_logs(self, log_group: logs.ILogGroup) -> logs.ResourcePolicy:
        """DataSync (a Basic-mode task) writes to a log group only where a CloudWatch Logs resource policy admits
        it: the form of DataSync's user guide ("Allowing DataSync to upload logs to CloudWatch log groups"), for
        this one log group. Such policies are account-wide, at most 10 per region (CloudWatch Logs' quotas)."""
        stack = self._stack
        return logs.ResourcePolicy(
            self,
            "LogsPolicy",
            resource_policy_name=f"{stack.stack_name}-datasync-logs",
            policy_statements=[
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("datasync.amazonaws.com")],
                    actions=["logs:PutLogEvents", "logs:CreateLogStream"],
                    resources=[log_group.log_group_arn],
                    conditions={
                        "ArnLike": {
                            "aws:SourceArn": f"arn:{stack.partition}:datasync:{stack.region}:{stack.account}:task/*"
                        },
                        "StringEquals": {"aws:SourceAccount": stack.account},
                    },
                )
            ],
        )
