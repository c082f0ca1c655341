"""The AWS Backup plan of the file system, in stages that retain data."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_backup as backup
from aws_cdk import aws_efs as efs
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.nag import acknowledge
from infra.naming import retained_name

BACKUP_POLICY = "service-role/AWSBackupServiceRolePolicyForBackup"
VAULT_NAME_LIMIT = 50  # AWS::Backup::BackupVault BackupVaultName: ^[a-zA-Z0-9\-\_]{2,50}$


class FileSystemBackup(Construct):
    """Daily backups of ``file_system``, kept 35 days, in a vault encrypted with the data key and retained.

    The schedule and retention are those of EFS automatic backups, which this plan replaces: its own vault
    and key, and a resource in the template that reviewers (and cdk-nag's EFSInBackupPlan) can see.

    Args:
        file_system: what is backed up.
        key: the vault's KMS key (the data key that already encrypts the file system).
    """

    def __init__(self, scope: Construct, id: str, *, file_system: efs.IFileSystem, key: kms.IKey) -> None:
        super().__init__(scope, id)
        # Retained, so named anew for each creation of the stack: a redeploy after `cdk destroy` would otherwise
        # fail on the name of the vault the destroyed stack kept (CDK's default name is fixed by construct path).
        self.vault = backup.BackupVault(
            self,
            "Vault",
            backup_vault_name=retained_name(self, "efs", VAULT_NAME_LIMIT),
            encryption_key=key,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.plan = backup.BackupPlan(
            self,
            "Plan",
            backup_plan_name=f"{Stack.of(self).stack_name}-file-system",
            backup_vault=self.vault,
            backup_plan_rules=[backup.BackupPlanRule.daily()],  # 05:00 UTC, deleted after 35 days
        )
        selection = self.plan.add_selection(
            "FileSystem", resources=[backup.BackupResource.from_efs_file_system(file_system)]
        )
        acknowledge(
            selection,
            {
                f"AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{BACKUP_POLICY}]": (
                    "AWS Backup's own service-role policy, which AWS maintains as Backup's APIs change; the role "
                    "is assumable only by backup.amazonaws.com and selects this one file system."
                ),
            },
        )
