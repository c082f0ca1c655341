"""The pre-training stack: network, storage, identity and the bundled training package."""

from __future__ import annotations

import dataclasses
import json

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.checkov import SkipChecksOnCdkProviders
from infra.config import StageConfig
from infra.encryption import DataKey
from infra.identity import SageMakerExecutionRole
from infra.instances import INSTANCE_TYPES
from infra.log_groups import encrypted_log_group
from infra.nag import acknowledge_inline_policies
from infra.naming import creation_suffix, retained_name
from infra.network import Network
from infra.notifications import Notifications
from infra.observability import console_links
from infra.observability.alarms import WorkflowAlarms
from infra.observability.budget import StageBudget
from infra.observability.capacity_alarm import CapacityWatch
from infra.observability.dashboard import TrainingDashboard
from infra.observability.health_alarms import HealthAlarms
from infra.plan_step.settings import StackSettings
from infra.sdk_tables import sdk_settings
from infra.source_bundle import TrainingPackage
from infra.storage.buckets import DataBuckets
from infra.storage.datasync import DatasetSync
from infra.storage.file_system import DATASETS_PATH, DatasetFileSystem
from infra.workflow.plan_function import PlanFunction
from infra.workflow.state_machine import Workflow


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
        cdk.Aspects.of(self).add(SkipChecksOnCdkProviders())
        self.log_groups: dict[str, logs.LogGroup] = {}
        storage = config.storage
        self.key = DataKey(self, "DataKey", retain=storage.retain_data, existing_arn=storage.existing.kms_key_arn).key
        flow_logs = encrypted_log_group(self, "FlowLogs", key=self.key, config=storage)
        self.network = Network(
            self,
            "Network",
            config=config.network,
            cidr=config.vpc_cidr,
            flow_log_group=flow_logs,
            source_buckets=config.source_buckets,
        )
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
        self.sdk = sdk_settings(config.region)
        self.package = TrainingPackage(self, "TrainingPackage", isolated=config.network.isolated)
        # Buckets of corpora and tokenizers besides the raw bucket (the stage's source_buckets): read only.
        self.source_buckets = [
            s3.Bucket.from_bucket_name(self, f"SourceBucket{i}", name) for i, name in enumerate(config.source_buckets)
        ]
        self.job_prefix = config.job_prefix
        self.execution_role = SageMakerExecutionRole(
            self,
            "SageMakerExecution",
            job_prefix=self.job_prefix,
            read_buckets=[self.buckets.raw, *self.source_buckets],
            write_buckets=[self.buckets.datasets, self.buckets.checkpoints, self.buckets.models],
            key=self.key,
            source_keys=config.source_bucket_keys,
            file_system=self.file_system.file_system,
            vpc=self.network.vpc,
            images=self.sdk["images"].values(),
        )
        self.package.grant_read(self.execution_role.role)
        if config.training.image_uri:
            self.execution_role.allow_image(config.training.image_uri)
        self._workflow(config)
        self._observability(config)
        self._outputs()
        acknowledge_inline_policies(self)

    def _workflow(self, config: StageConfig) -> None:
        """The Plan function, the DataSync task, the topic and the state machine that ties them together."""
        job_prefix = self.job_prefix
        network, buckets = self.network, self.buckets
        settings = StackSettings(
            region=self.region,
            account=self.account,
            job_prefix=job_prefix,
            stack_creation=creation_suffix(self),
            role_arn=self.execution_role.role.role_arn,
            kms_key_arn=self.key.key_arn,
            raw_bucket=buckets.raw.bucket_name,
            datasets_bucket=buckets.datasets.bucket_name,
            checkpoints_bucket=buckets.checkpoints.bucket_name,
            models_bucket=buckets.models.bucket_name,
            file_system_id=self.file_system.file_system.file_system_id,
            efs_datasets_path=DATASETS_PATH,
            subnet_ids=network.vpc.select_subnets(**network.job_subnets._values).subnet_ids,
            security_group_ids=[network.jobs_security_group.security_group_id],
            source_dir_uri=self.package.s3_uri,
            **self.sdk,
            stage=json.loads(json.dumps(dataclasses.asdict(config))),  # JSON values only: jsii takes no tuple
        )
        self.plan = plan = PlanFunction(
            self,
            "Plan",
            settings=dataclasses.asdict(settings),
            key=self.key,
            datasets=buckets.datasets,
            raw=buckets.raw,
            models=buckets.models,
            sources=self.source_buckets,
            source_keys=config.source_bucket_keys,
            log_group=self._log_group("PlanLogs", config),
            reserved_concurrency=config.security.plan_reserved_concurrency,
        )
        sync = DatasetSync(
            self,
            "DatasetSync",
            bucket=buckets.datasets,
            key=self.key,
            file_system=self.file_system.file_system,
            access_point=self.file_system.datasets_access_point,
            mount_targets=self.file_system.mount_targets_available,
            vpc=network.vpc,
            subnet=network.vpc.select_subnets(**network.job_subnets._values).subnets[0],
            log_group=self._log_group("DataSyncLogs", config),
        )
        self.notifications = Notifications(self, "Notifications", key=self.key, email=config.notification_email)
        self.workflow = Workflow(
            self,
            "Workflow",
            plan_function=plan.function,
            job_prefix=job_prefix,
            execution_role_arn=self.execution_role.role.role_arn,
            datasync_task=sync.task,
            key=self.key,
            topic=self.notifications.topic,
            log_level=config.observability.state_machine_log_level,
            include_execution_data=config.observability.log_execution_data,
            # Vended logs (Step Functions' delivery) under /aws/vendedlogs/: CloudWatch Logs then needs no resource
            # policy entry per log group, whose policy is capped at 5,120 characters per account and region.
            log_group=self._log_group(
                "WorkflowLogs", config, name=f"/aws/vendedlogs/states/{retained_name(self, 'workflow', 200)}"
            ),
            debugger=config.observability.debugger,
        )
        # SnsPublish grants sns:Publish only; the encrypted topic also needs its key, through SNS.
        self.notifications.grant_publish(self.workflow.state_machine)

    def _log_group(self, id: str, config: StageConfig, name: str | None = None) -> logs.LogGroup:
        """An encrypted log group with the stage's retention, remembered for the console-link outputs."""
        self.log_groups[id] = encrypted_log_group(self, id, key=self.key, config=config.storage, name=name)
        return self.log_groups[id]

    def _observability(self, config: StageConfig) -> None:
        """Alarms (workflow, EFS, capacity wait, training health), the budget, and the dashboard. A failed job is
        announced once, by the workflow's NotifyFailure (its cause carries the job's FailureReason): no job-event
        rule and no execution alarm e-mails it again."""
        topic, fs_id = self.notifications.topic, self.file_system.file_system.file_system_id
        machine = self.workflow.state_machine
        self.alarms = WorkflowAlarms(
            self,
            "Alarms",
            state_machine=machine,
            file_system_id=fs_id,
            topic=topic,
            key=self.key,
            efs_throughput_percent=config.observability.efs_throughput_alarm_percent,
        )
        self.capacity = CapacityWatch(
            self,
            "CapacityWatch",
            job_prefix=self.job_prefix,
            alarm_hours=config.observability.capacity_wait_alarm_hours,
            log_group=self._log_group("CapacityWatchLogs", config),
            topic=topic,
        )
        if config.observability.monthly_budget_usd:
            StageBudget(
                self,
                "Budget",
                stage=config.name,
                usd_per_month=config.observability.monthly_budget_usd,
                topic=topic,
                key=self.key,
            )
        gpus = INSTANCE_TYPES[config.training.instance_type].gpus
        self.health_alarms = HealthAlarms(
            self, "HealthAlarms", config=config.observability, gpus_per_host=gpus, topic=topic
        )
        self.dashboard = TrainingDashboard(
            self,
            "Dashboard",
            state_machine=machine,
            file_system_id=fs_id,
            job_prefix=self.job_prefix,
            gpus_per_host=gpus,
            alarms=[*self.alarms.alarms, self.capacity.alarm, *self.health_alarms.alarms],
        ).dashboard

    def _outputs(self) -> None:
        for name, bucket in self.buckets.data_buckets.items():
            cdk.CfnOutput(self, f"{name.title()}Bucket", value=bucket.bucket_name)
        cdk.CfnOutput(self, "FileSystemId", value=self.file_system.file_system.file_system_id)
        cdk.CfnOutput(self, "ExecutionRoleArn", value=self.execution_role.role.role_arn)
        cdk.CfnOutput(self, "PlanRoleArn", value=self.plan.role.role_arn)  # with it, admitted by a source bucket
        cdk.CfnOutput(self, "VpcId", value=self.network.vpc.vpc_id)
        cdk.CfnOutput(self, "StateMachineArn", value=self.workflow.state_machine.state_machine_arn)
        cdk.CfnOutput(self, "TopicArn", value=self.notifications.topic.topic_arn)
        region = self.region
        links = {
            "StateMachineConsole": console_links.state_machine_url(
                region, self.workflow.state_machine.state_machine_arn
            ),
            "DashboardUrl": console_links.dashboard_url(region, self.dashboard.dashboard_name),
            "TrainingJobLogs": console_links.log_group_url(
                region, console_links.TRAINING_LOG_GROUP, f"{self.job_prefix}-"
            ),
            "ProcessingJobLogs": console_links.log_group_url(
                region, console_links.PROCESSING_LOG_GROUP, f"{self.job_prefix}-"
            ),
            **{
                f"{id}Console": console_links.log_group_url(region, g.log_group_name)
                for id, g in self.log_groups.items()
            },
        }
        for name, url in links.items():
            cdk.CfnOutput(self, name, value=url)
