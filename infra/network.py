"""The VPC the SageMaker jobs run in: private subnets only, S3 through a gateway endpoint."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import NetworkConfig
from infra.nag import acknowledge_compliance

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


# What the jobs do in S3 (the actions of their role, infra/identity.py); through the S3 endpoint of an isolated
# network, only these and only on this account's buckets.
JOB_S3_ACTIONS = [
    "s3:GetBucketLocation",
    "s3:ListBucket",
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
]
SOURCE_READ_ACTIONS = ["s3:GetBucketLocation", "s3:ListBucket", "s3:GetObject"]  # what jobs do with a source bucket


# Why the jobs' group admits all traffic from itself (the compliance packs' EC2RestrictedCommonPorts).
BETWEEN_HOSTS = (
    "Admits only members of this group, the hosts of SageMaker jobs (DataSync has a group of its own), not an "
    "address range. SageMaker requires all traffic between them for EFA instance types (p4d, p5: EFA's transport "
    "has no ports), and inter-container traffic encryption adds IPsec (UDP 500, IP protocol 50); the instance "
    "type is chosen per execution, so the rule cannot be narrowed to one type's needs."
)
PUBLIC_ROUTE = (
    "The public subnet holds only the NAT gateway that gives the jobs' private subnets egress; nothing else is "
    "placed here, and no subnet a job runs in routes to the internet gateway. Stages for regulated data set "
    "network.isolated, which has no internet gateway at all."
)


class Network(Construct):
    """Private subnets for the jobs, a security group they share, and VPC flow logs.

    With ``config.isolated`` the subnets have no internet route at all and AWS APIs are reached
    through interface endpoints; otherwise egress goes through ``config.nat_gateways`` NAT gateways.

    Args:
        config: the stage's network settings.
        cidr: the VPC's address range (``StageConfig.vpc_cidr``).
        flow_log_group: where VPC flow logs go (encrypted, with retention).
        source_buckets: the stage's other buckets of corpora and tokenizers, in any account: an isolated VPC's S3
            endpoint admits reading them besides this account's buckets (default none).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: NetworkConfig,
        cidr: str,
        flow_log_group: logs.ILogGroup,
        source_buckets: tuple[str, ...] = (),
    ) -> None:
        super().__init__(scope, id)
        private = ec2.SubnetType.PRIVATE_ISOLATED if config.isolated else ec2.SubnetType.PRIVATE_WITH_EGRESS
        subnets = [ec2.SubnetConfiguration(name="jobs", subnet_type=private, cidr_mask=20)]
        if not config.isolated:
            # Only the NAT gateways live here, on Elastic IPs: nothing gets a public address on launch.
            subnets.append(
                ec2.SubnetConfiguration(
                    name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24, map_public_ip_on_launch=False
                )
            )
        # The role VPC Flow Logs delivers with, assumable only for flow logs of this account (confused deputy).
        stack = Stack.of(self)
        flow_logs_role = iam.Role(
            self,
            "FlowLogsRole",
            assumed_by=iam.ServicePrincipal(
                "vpc-flow-logs.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:vpc-flow-log/*"
                    },
                },
            ),
            description="VPC flow logs of the jobs' VPC to their log group",
        )
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            **({"availability_zones": list(config.availability_zones)} if config.availability_zones else {}),
            max_azs=None if config.availability_zones else config.max_azs,
            nat_gateways=config.nat_gateways,
            subnet_configuration=subnets,
            restrict_default_security_group=True,
            flow_logs={
                "All": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group, flow_logs_role)
                )
            },
        )
        self.job_subnets = ec2.SubnetSelection(subnet_type=private)
        s3_endpoint = self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        if config.isolated:
            self._limit_s3_endpoint(s3_endpoint, source_buckets)
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
        (between_hosts,) = [
            c for c in self.jobs_security_group.node.children if isinstance(c, ec2.CfnSecurityGroupIngress)
        ]
        acknowledge_compliance(between_hosts, {"EC2RestrictedCommonPorts": BETWEEN_HOSTS})
        for public in self.vpc.public_subnets:
            acknowledge_compliance(public, {"VPCNoUnrestrictedRouteToIGW": PUBLIC_ROUTE})
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
        account = Stack.of(self).account
        for name, service in ISOLATED_ENDPOINTS.items():
            endpoint = self.vpc.add_interface_endpoint(
                name,
                service=service,
                subnets=self.job_subnets,
                private_dns_enabled=True,
                security_groups=[endpoints_sg],
                open=False,
            )
            # Only this account's principals: code in a job cannot call these APIs with credentials of its own.
            endpoint.add_to_policy(
                iam.PolicyStatement(
                    principals=[iam.AnyPrincipal()],
                    actions=["*"],  # any action of this endpoint's one service, by this account's principals
                    resources=["*"],
                    conditions={"StringEquals": {"aws:PrincipalAccount": account}},
                )
            )

    def _limit_s3_endpoint(self, endpoint: ec2.GatewayVpcEndpoint, source_buckets: tuple[str, ...]) -> None:
        """With no internet route, the S3 endpoint is the jobs' only way out: only this account's buckets.

        Without a policy, code in a job could write to any bucket in the region, e.g. with a presigned URL of
        another account's. ECR serves image layers (the Deep Learning Containers, Debugger's rule image) from
        an AWS-owned bucket, which is admitted for reading only; so are the stage's ``source_buckets``, which may
        be another account's.
        """
        stack = Stack.of(self)
        endpoint.add_to_policy(
            iam.PolicyStatement(
                principals=[iam.AnyPrincipal()],
                actions=JOB_S3_ACTIONS,
                resources=["*"],
                conditions={"StringEquals": {"aws:ResourceAccount": stack.account}},
            )
        )
        endpoint.add_to_policy(
            iam.PolicyStatement(
                principals=[iam.AnyPrincipal()],
                actions=["s3:GetObject"],
                resources=[f"arn:{stack.partition}:s3:::prod-{stack.region}-starport-layer-bucket/*"],
            )
        )
        if source_buckets:
            endpoint.add_to_policy(
                iam.PolicyStatement(
                    principals=[iam.AnyPrincipal()],
                    actions=SOURCE_READ_ACTIONS,
                    resources=[f"arn:{stack.partition}:s3:::{b}{end}" for b in source_buckets for end in ("", "/*")],
                )
            )
