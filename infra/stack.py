"""The pre-training stack: network, storage, identity and the bundled training package."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from infra.buckets import DataBuckets
from infra.config import StageConfig
from infra.encryption import DataKey
from infra.file_system import DatasetFileSystem
from infra.identity import SageMakerExecutionRole
from infra.log_groups import encrypted_log_group
from infra.network import Network
from infra.source_bundle import TrainingPackage


class PretrainingStack(cdk.Stack):
    """Everything one stage needs to preprocess a corpus and train a GPT model on SageMaker.

    Args:
        config: the validated stage configuration.
    """

    def __init__(self, scope: Construct, id: str, *, config: StageConfig) -> None:
        super().__init__(
            scope,
            id,
            env=cdk.Environment(account=config.account, region=config.region),
            description=f"GPT pre-training on SageMaker ({config.name})",
        )
        self.config = config
        storage = config.storage
        self.key = DataKey(self, "DataKey", retain=storage.retain_data).key
        flow_logs = encrypted_log_group(self, "FlowLogs", key=self.key, config=storage)
        self.network = Network(self, "Network", config=config.network, flow_log_group=flow_logs)
        self.buckets = DataBuckets(self, "Buckets", key=self.key, config=storage)
        self.file_system = DatasetFileSystem(
            self,
            "Efs",
            vpc=self.network.vpc,
            subnets=self.network.job_subnets,
            clients=self.network.jobs_security_group,
            key=self.key,
            config=storage,
        )
        self.package = TrainingPackage(self, "TrainingPackage")
        self.execution_role = SageMakerExecutionRole(
            self,
            "SageMakerExecution",
            read_buckets=[self.buckets.raw],
            write_buckets=[self.buckets.datasets, self.buckets.checkpoints, self.buckets.models],
            key=self.key,
            file_system=self.file_system.file_system,
            vpc=self.network.vpc,
        )
        self.package.grant_read(self.execution_role.role)
        self._outputs()

    def _outputs(self) -> None:
        for name, bucket in self.buckets.data_buckets.items():
            cdk.CfnOutput(self, f"{name.title()}Bucket", value=bucket.bucket_name)
        cdk.CfnOutput(self, "FileSystemId", value=self.file_system.file_system.file_system_id)
        cdk.CfnOutput(self, "ExecutionRoleArn", value=self.execution_role.role.role_arn)
        cdk.CfnOutput(self, "VpcId", value=self.network.vpc.vpc_id)
