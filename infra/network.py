"""The VPC the SageMaker jobs run in: private subnets only, S3 through a gateway endpoint."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import NetworkConfig

# Interface endpoints a job needs when the subnets have no route to the internet.
ISOLATED_ENDPOINTS = {
    "SageMakerApi": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_API,
    "SageMakerRuntime": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_RUNTIME,
    "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "Monitoring": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
}


class Network(Construct):
    """Private subnets for the jobs, a security group they share, and VPC flow logs.

    With ``config.isolated`` the subnets have no internet route at all and AWS APIs are reached
    through interface endpoints; otherwise egress goes through ``config.nat_gateways`` NAT gateways.

    Args:
        config: the stage's network settings.
        flow_log_group: where VPC flow logs go (encrypted, with retention).
    """

    def __init__(self, scope: Construct, id: str, *, config: NetworkConfig, flow_log_group: logs.ILogGroup) -> None:
        super().__init__(scope, id)
        private = ec2.SubnetType.PRIVATE_ISOLATED if config.isolated else ec2.SubnetType.PRIVATE_WITH_EGRESS
        subnets = [ec2.SubnetConfiguration(name="jobs", subnet_type=private, cidr_mask=20)]
        if not config.isolated:
            subnets.append(ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24))
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr("10.20.0.0/16"),
            max_azs=config.max_azs,
            nat_gateways=config.nat_gateways,
            subnet_configuration=subnets,
            restrict_default_security_group=True,
            flow_logs={
                "All": ec2.FlowLogOptions(destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group))
            },
        )
        self.job_subnets = ec2.SubnetSelection(subnet_type=private)
        self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        self.jobs_security_group = ec2.SecurityGroup(
            self,
            "JobsSecurityGroup",
            vpc=self.vpc,
            description="SageMaker processing and training jobs",
            allow_all_outbound=True,
        )
        # Hosts of one distributed job talk to each other (NCCL, MPI, gRPC for tf.distribute).
        self.jobs_security_group.add_ingress_rule(
            self.jobs_security_group, ec2.Port.all_traffic(), "Traffic between hosts of a distributed job"
        )
        if config.isolated:
            self._add_interface_endpoints()

    def _add_interface_endpoints(self) -> None:
        """HTTPS endpoints for the AWS APIs the jobs call, reachable from the jobs' security group only."""
        endpoints_sg = ec2.SecurityGroup(
            self,
            "EndpointsSecurityGroup",
            vpc=self.vpc,
            description="VPC interface endpoints",
            allow_all_outbound=False,
        )
        endpoints_sg.add_ingress_rule(self.jobs_security_group, ec2.Port.HTTPS, "HTTPS from SageMaker jobs")
        for name, service in ISOLATED_ENDPOINTS.items():
            self.vpc.add_interface_endpoint(
                name,
                service=service,
                subnets=self.job_subnets,
                private_dns_enabled=True,
                security_groups=[endpoints_sg],
                open=False,
            )
