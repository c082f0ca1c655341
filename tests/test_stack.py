"""Fine-grained assertions on the synthesized templates: the properties that keep data safe."""

from __future__ import annotations

from aws_cdk.assertions import Match, Template

DATA_BUCKETS = ("raw/", "datasets/", "checkpoints/", "models/")  # access-log prefixes name the data buckets


def resources(template: Template, kind: str) -> dict:
    return template.find_resources(kind)


def data_buckets(template: Template) -> dict:
    return {
        name: r
        for name, r in resources(template, "AWS::S3::Bucket").items()
        if r["Properties"].get("LoggingConfiguration", {}).get("LogFilePrefix") in DATA_BUCKETS
    }


def test_the_data_key_rotates(dev_template: Template, prod_template: Template):
    for template in (dev_template, prod_template):
        template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_data_buckets_are_kms_encrypted_private_tls_only_and_logged(prod_template: Template):
    buckets = data_buckets(prod_template)
    assert len(buckets) == 4
    key = next(iter(resources(prod_template, "AWS::KMS::Key")))
    for bucket in buckets.values():
        props = bucket["Properties"]
        sse = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
        assert sse == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Fn::GetAtt": [key, "Arn"]}}
        assert all(props["PublicAccessBlockConfiguration"].values())
    policies = resources(prod_template, "AWS::S3::BucketPolicy").values()
    tls_denied = {
        p["Properties"]["Bucket"]["Ref"]
        for p in policies
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
    }
    assert set(buckets) <= tls_denied


def test_what_is_costly_to_make_again_is_versioned_and_old_versions_expire(prod_template: Template):
    expiry = {}
    for bucket in data_buckets(prod_template).values():
        props = bucket["Properties"]
        if props.get("VersioningConfiguration", {}).get("Status") == "Enabled":
            rules = props["LifecycleConfiguration"]["Rules"]
            days = [
                r["NoncurrentVersionExpiration"]["NoncurrentDays"] for r in rules if "NoncurrentVersionExpiration" in r
            ]
            expiry[props["LoggingConfiguration"]["LogFilePrefix"]] = days
    assert expiry == {"datasets/": [7], "checkpoints/": [3], "models/": [30]}  # raw: only people upload to it


def test_no_stage_backs_up_the_file_system_a_cache_of_the_datasets_bucket(dev_template, prod_template):
    """Issue 49 item 7: EFS holds only what DataSync stages from the (versioned, retained) datasets bucket."""
    for template in (dev_template, prod_template):
        for kind in ("AWS::Backup::BackupPlan", "AWS::Backup::BackupVault", "AWS::Backup::BackupSelection"):
            template.resource_count_is(kind, 0)
        template.has_resource_properties("AWS::EFS::FileSystem", {"BackupPolicy": {"Status": "DISABLED"}})


def test_data_survives_destroy_by_default_and_dev_may_delete(dev_template: Template, prod_template: Template):
    for kind in ("AWS::S3::Bucket", "AWS::EFS::FileSystem", "AWS::KMS::Key"):
        assert {r["DeletionPolicy"] for r in resources(prod_template, kind).values()} == {"Retain"}, kind
        assert {r["DeletionPolicy"] for r in resources(dev_template, kind).values()} == {"Delete"}, kind


def test_efs_is_encrypted_elastic_and_mounted_in_private_subnets(prod_template: Template):
    key = next(iter(resources(prod_template, "AWS::KMS::Key")))
    prod_template.has_resource_properties(
        "AWS::EFS::FileSystem",
        {"Encrypted": True, "KmsKeyId": {"Fn::GetAtt": [key, "Arn"]}, "ThroughputMode": "elastic"},
    )
    private = {
        name
        for name, subnet in resources(prod_template, "AWS::EC2::Subnet").items()
        if not subnet["Properties"]["MapPublicIpOnLaunch"]
    }
    targets = resources(prod_template, "AWS::EFS::MountTarget").values()
    assert len(targets) == 2
    assert {t["Properties"]["SubnetId"]["Ref"] for t in targets} == private
    prod_template.has_resource_properties("AWS::EFS::AccessPoint", {"RootDirectory": {"Path": "/datasets"}})


def test_the_datasync_task_logs_each_file_to_an_encrypted_log_group_it_is_admitted_to(dev_template: Template):
    """A failed verify then names the file (DataSync's user guide: log level TRANSFER logs every file transferred
    and verified); Basic-mode tasks write only where a CloudWatch Logs resource policy admits DataSync."""
    template = dev_template.to_json()["Resources"]
    (task,) = resources(dev_template, "AWS::DataSync::Task").values()
    group = task["Properties"]["CloudWatchLogGroupArn"]["Fn::GetAtt"][0]
    assert task["Properties"]["Options"]["LogLevel"] == "TRANSFER"
    assert template[group]["Type"] == "AWS::Logs::LogGroup" and "KmsKeyId" in template[group]["Properties"]
    ((policy_id, policy),) = resources(dev_template, "AWS::Logs::ResourcePolicy").items()
    assert policy_id in task["DependsOn"]  # admitted before the task can first run
    document = policy["Properties"]["PolicyDocument"]["Fn::Join"][1]
    assert {"Fn::GetAtt": [group, "Arn"]} in document
    assert '"Principal":{"Service":"datasync.amazonaws.com"}' in document[0]


def test_nfs_is_admitted_only_from_the_jobs_and_datasync_security_groups(dev_template: Template):
    ingress = [r["Properties"] for r in resources(dev_template, "AWS::EC2::SecurityGroupIngress").values()]
    nfs = [rule for rule in ingress if rule.get("FromPort") == 2049]
    assert {rule["ToPort"] for rule in nfs} == {2049}
    sources = sorted(rule["SourceSecurityGroupId"]["Fn::GetAtt"][0] for rule in nfs)
    assert [s[:-8] for s in sources] == ["DatasetSyncSecurityGroup", "NetworkJobsSecurityGroup"]
    # DataSync's own group reaches the mount targets over NFS and nothing else.
    datasync = {"Fn::GetAtt": [sources[0], "GroupId"]}
    egress = [r["Properties"] for r in resources(dev_template, "AWS::EC2::SecurityGroupEgress").values()]
    assert [
        (e["IpProtocol"], e["FromPort"], e["DestinationSecurityGroupId"]["Fn::GetAtt"][0][:-8])
        for e in egress
        if e["GroupId"] == datasync
    ] == [("tcp", 2049, "EfsSecurityGroup")]
    assert "SecurityGroupEgress" not in resources(dev_template, "AWS::EC2::SecurityGroup")[sources[0]]["Properties"]
    for group in resources(dev_template, "AWS::EC2::SecurityGroup").values():
        for rule in group["Properties"].get("SecurityGroupIngress", []):
            assert rule.get("CidrIp") != "0.0.0.0/0"


def test_dev_egresses_through_one_nat_gateway(dev_template: Template):
    dev_template.resource_count_is("AWS::EC2::NatGateway", 1)
    dev_template.has_resource_properties("AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway"})
    dev_template.resource_count_is("AWS::EC2::VPCEndpoint", 1)  # S3 only


def test_isolated_prod_has_no_internet_route_and_reaches_aws_through_endpoints(prod_template: Template):
    prod_template.resource_count_is("AWS::EC2::NatGateway", 0)
    prod_template.resource_count_is("AWS::EC2::InternetGateway", 0)
    services = {
        r["Properties"]["ServiceName"] if isinstance(r["Properties"]["ServiceName"], str) else "s3"
        for r in resources(prod_template, "AWS::EC2::VPCEndpoint").values()
    }
    for suffix in ("sagemaker.api", "sagemaker.runtime", "ecr.api", "ecr.dkr", "logs", "monitoring", "sts"):
        assert f"com.amazonaws.us-east-1.{suffix}" in services
    prod_template.has_resource_properties(
        "AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Interface", "PrivateDnsEnabled": True}
    )


def test_vpc_flow_logs_go_to_an_encrypted_log_group_with_retention(prod_template: Template):
    (flow_log,) = prod_template.find_resources("AWS::EC2::FlowLog").values()
    (vpc,) = prod_template.find_resources("AWS::EC2::VPC")
    assert flow_log["Properties"]["ResourceId"] == {"Ref": vpc} and flow_log["Properties"]["TrafficType"] == "ALL"
    assert flow_log["Properties"]["LogDestinationType"] == "cloud-watch-logs"
    group = prod_template.to_json()["Resources"][flow_log["Properties"]["LogGroupName"]["Ref"]]
    assert group["Type"] == "AWS::Logs::LogGroup"
    assert group["Properties"]["RetentionInDays"] == 365
    key, attribute = group["Properties"]["KmsKeyId"]["Fn::GetAtt"]
    assert attribute == "Arn" and key in prod_template.find_resources("AWS::KMS::Key")


def test_roles_are_scoped(dev_template: Template):
    dev_template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    Match.object_like(
                        {
                            "Principal": {"Service": "sagemaker.amazonaws.com"},
                            "Condition": {
                                "StringEquals": {"aws:SourceAccount": "123456789012"},
                                "ArnLike": {"aws:SourceArn": Match.any_value()},
                            },
                        }
                    )
                ]
            }
        },
    )
    allowed_on_any_resource = {
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeVpcs",
        "ec2:DescribeDhcpOptions",
        "ec2:DescribeSubnets",
        "ec2:DescribeSecurityGroups",
        "ec2:CreateNetworkInterface",
        "ec2:CreateNetworkInterfacePermission",
        "ec2:DeleteNetworkInterface",
        "ec2:DeleteNetworkInterfacePermission",
        "ecr:GetAuthorizationToken",
        "cloudwatch:PutMetricData",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
        "xray:GetSamplingRules",
        "xray:GetSamplingTargets",
        "logs:CreateLogDelivery",
        "logs:GetLogDelivery",
        "logs:UpdateLogDelivery",
        "logs:DeleteLogDelivery",
        "logs:ListLogDeliveries",
        "logs:PutResourcePolicy",
        "logs:DescribeResourcePolicies",
        "logs:DescribeLogGroups",
        "servicequotas:ListServiceQuotas",
        "servicequotas:ListAWSDefaultServiceQuotas",
        "sagemaker:ListTrainingJobs",
    }  # actions without resource-level permissions
    for policy in resources(dev_template, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert not any(a == "*" or a.endswith(":*") for a in actions), statement
            if statement["Resource"] == "*":
                assert set(actions) <= allowed_on_any_resource, statement


def test_training_package_location_is_an_output(dev_template: Template):
    outputs = dev_template.find_outputs("*")
    source = next(o for name, o in outputs.items() if name.startswith("TrainingPackageSourceDirUri"))
    assert "s3://" in str(source["Value"])
    assert {"RawBucket", "DatasetsBucket", "CheckpointsBucket", "ModelsBucket", "FileSystemId"} <= set(outputs)


def test_every_acknowledged_finding_has_a_reason(dev_template: Template, prod_template: Template):
    for template in (dev_template, prod_template):
        for resource in template.to_json()["Resources"].values():
            for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
                assert len(rule["reason"]) >= 40, rule
