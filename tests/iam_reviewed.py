"""The reviewed permissions of the stack (tests/test_security.py asserts the templates grant exactly these).

A new permission, a dropped condition or a new wildcard fails the tests until it is added here, which is the
review: say why in SECURITY.md's table in the same change. Names are construct paths without the stack name
(tests/iam_policies.py). An entry is ``[deny ]<action>[ if <condition key>, ...]``.
"""

from __future__ import annotations

# Role -> (trusted service, condition keys of the trust policy, AWS managed policies attached).
ROLES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "SageMakerExecution/Role": ("service:sagemaker.amazonaws.com", ("aws:SourceAccount", "aws:SourceArn"), ()),
    "Plan/Role": ("service:lambda.amazonaws.com", (), ()),
    "CapacityWatch/Role": ("service:lambda.amazonaws.com", (), ()),
    "Workflow/StateMachineRole": ("service:states.amazonaws.com", ("aws:SourceAccount", "aws:SourceArn"), ()),
    "DatasetSync/BucketAccessRole": ("service:datasync.amazonaws.com", ("aws:SourceAccount", "aws:SourceArn"), ()),
    "DatasetSync/FileSystemAccessRole": ("service:datasync.amazonaws.com", ("aws:SourceAccount", "aws:SourceArn"), ()),
    "Network/FlowLogsRole": ("service:vpc-flow-logs.amazonaws.com", ("aws:SourceAccount", "aws:SourceArn"), ()),
    "Custom::VpcRestrictDefaultSGCustomResourceProvider/Role": (
        "service:lambda.amazonaws.com",
        (),
        ("service-role/AWSLambdaBasicExecutionRole",),
    ),
    "Custom::S3AutoDeleteObjectsCustomResourceProvider/Role": (
        "service:lambda.amazonaws.com",
        (),
        ("service-role/AWSLambdaBasicExecutionRole",),
    ),
}

AUTO_DELETE = "role:Custom::S3AutoDeleteObjectsCustomResourceProvider/Role"
AUTO_DELETE_ACTIONS = ["s3:DeleteObject*", "s3:GetBucket*", "s3:List*", "s3:PutBucketPolicy"]
TLS_ONLY = ["deny s3:* if aws:SecureTransport"]
ACCOUNT_PRINCIPALS_ONLY = ["* if aws:PrincipalAccount"]

# Holder (a role, or the resource whose policy it is) -> principal (``self`` for a role's own policies) -> entries.
PERMISSIONS: dict[str, dict[str, list[str]]] = {
    "SageMakerExecution/Role": {
        "self": [
            "s3:GetBucketLocation",
            "s3:ListBucket",
            "s3:ListBucket if s3:prefix",
            "s3:GetObject",
            "s3:PutObject",
            "s3:DeleteObject",
            "s3:AbortMultipartUpload",
            "kms:Decrypt",
            "kms:Encrypt",
            "kms:GenerateDataKey",
            "kms:DescribeKey",
            "kms:CreateGrant if kms:GrantIsForAWSResource",
            "elasticfilesystem:ClientMount",
            "elasticfilesystem:ClientWrite",
            "elasticfilesystem:DescribeMountTargets",
            "ec2:DescribeDhcpOptions",
            "ec2:DescribeNetworkInterfaces",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeSubnets",
            "ec2:DescribeVpcs",
            "ec2:CreateNetworkInterface",
            "ec2:CreateNetworkInterface if ec2:Vpc",
            "ec2:CreateNetworkInterfacePermission if ec2:Vpc",
            "ec2:DeleteNetworkInterface if ec2:Vpc",
            "ec2:DeleteNetworkInterfacePermission if ec2:Vpc",
            "ecr:GetAuthorizationToken",
            "ecr:BatchCheckLayerAvailability",
            "ecr:BatchGetImage",
            "ecr:GetDownloadUrlForLayer",
            "logs:CreateLogGroup",
            "logs:CreateLogStream",
            "logs:DescribeLogStreams",
            "logs:PutLogEvents",
            "cloudwatch:PutMetricData if cloudwatch:namespace",
        ],
    },
    "Plan/Role": {
        "self": [
            "s3:ListBucket",
            "s3:GetObject",
            "s3:PutObject",
            "s3:DeleteObject",
            "kms:GenerateDataKey if kms:ViaService",
            "kms:Decrypt",
            "logs:CreateLogStream",
            "logs:PutLogEvents",
            "xray:PutTelemetryRecords",
            "xray:PutTraceSegments",
            "servicequotas:ListServiceQuotas",
            "servicequotas:ListAWSDefaultServiceQuotas",
        ],
    },
    "CapacityWatch/Role": {
        "self": [
            "logs:CreateLogStream",
            "logs:PutLogEvents",
            "sagemaker:ListTrainingJobs",
            "sagemaker:DescribeTrainingJob",
        ],
    },
    "DataSyncLogs": {
        "service:datasync.amazonaws.com": [
            "logs:CreateLogStream if aws:SourceAccount, aws:SourceArn",
            "logs:PutLogEvents if aws:SourceAccount, aws:SourceArn",
        ]
    },
    "CapacityWatch/Function": {"service:events.amazonaws.com": ["lambda:InvokeFunction if aws:SourceArn"]},
    "Workflow/StateMachineRole": {
        "self": [
            "lambda:InvokeFunction",
            "sagemaker:CreateProcessingJob",
            "sagemaker:DescribeProcessingJob",
            "sagemaker:StopProcessingJob",
            "sagemaker:CreateTrainingJob",
            "sagemaker:DescribeTrainingJob",
            "sagemaker:StopTrainingJob",
            "sagemaker:AddTags",
            "sagemaker:ListTags",
            "sagemaker:CreateModel",
            "sagemaker:CreateEndpointConfig",
            "sagemaker:CreateEndpoint",
            "sagemaker:UpdateEndpoint",
            "sagemaker:DescribeEndpoint",
            "sagemaker:DescribeEndpointConfig",
            "sagemaker:DeleteEndpointConfig",
            "sagemaker:DeleteModel",
            "kms:CreateGrant if kms:GrantIsForAWSResource, kms:ViaService",
            "iam:PassRole if iam:PassedToService",
            "events:PutTargets",
            "events:PutRule",
            "events:DescribeRule",
            "datasync:StartTaskExecution",
            "datasync:DescribeTaskExecution",
            "sns:Publish",
            "kms:Decrypt if kms:ViaService",
            "kms:GenerateDataKey if kms:ViaService",
            "logs:CreateLogDelivery",
            "logs:GetLogDelivery",
            "logs:UpdateLogDelivery",
            "logs:DeleteLogDelivery",
            "logs:ListLogDeliveries",
            "logs:PutResourcePolicy",
            "logs:DescribeResourcePolicies",
            "logs:DescribeLogGroups",
            "xray:PutTraceSegments",
            "xray:PutTelemetryRecords",
            "xray:GetSamplingRules",
            "xray:GetSamplingTargets",
        ],
    },
    "DatasetSync/BucketAccessRole": {
        "self": [
            "s3:GetBucketLocation",
            "s3:ListBucket",
            "s3:ListBucketMultipartUploads",
            "s3:GetObject",
            "s3:GetObjectTagging",
            "s3:GetObjectVersion",
            "s3:GetObjectVersionTagging",
            "kms:Decrypt if kms:ViaService",
        ],
    },
    "DatasetSync/FileSystemAccessRole": {
        "self": [
            "elasticfilesystem:ClientMount",
            "elasticfilesystem:ClientWrite",
            "elasticfilesystem:ClientRootAccess",
        ],
    },
    "Network/FlowLogsRole": {
        "self": ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
    },
    "Custom::VpcRestrictDefaultSGCustomResourceProvider/Role": {
        "self": [
            "ec2:AuthorizeSecurityGroupIngress",
            "ec2:AuthorizeSecurityGroupEgress",
            "ec2:RevokeSecurityGroupIngress",
            "ec2:RevokeSecurityGroupEgress",
        ],
    },
    "DataKey/Key": {
        "account": ["kms:*"],
        "service:logs.${AWS::Region}.amazonaws.com": [
            f"{action} if kms:EncryptionContext:aws:logs:arn"
            for action in (
                "kms:Encrypt",
                "kms:Decrypt",
                "kms:ReEncryptFrom",
                "kms:ReEncryptTo",
                "kms:GenerateDataKey",
                "kms:GenerateDataKeyWithoutPlaintext",
            )
        ],
        **{
            f"service:{service}.amazonaws.com": [
                "kms:Decrypt if kms:EncryptionContext:aws:sns:topicArn",
                "kms:GenerateDataKey if kms:EncryptionContext:aws:sns:topicArn",
            ]
            for service in ("cloudwatch", "budgets")
        },
    },
    "Notifications/Topic": {
        "*": ["deny sns:Publish if aws:SecureTransport"],
        "service:cloudwatch.amazonaws.com": ["sns:Publish if aws:SourceArn"],
        "service:budgets.amazonaws.com": ["sns:Publish if aws:SourceAccount, aws:SourceArn"],
    },
    "Buckets/AccessLogs": {
        "*": TLS_ONLY,
        "service:logging.s3.amazonaws.com": ["s3:PutObject if aws:SourceAccount, aws:SourceArn"],
        AUTO_DELETE: AUTO_DELETE_ACTIONS,
    },
    **{
        f"Buckets/{name}": {"*": TLS_ONLY, AUTO_DELETE: AUTO_DELETE_ACTIONS}
        for name in ("Raw", "Datasets", "Checkpoints", "Models")
    },
    "Network/Vpc/S3": {
        "*": [
            *(
                f"{action} if aws:ResourceAccount"
                for action in (
                    "s3:GetBucketLocation",
                    "s3:ListBucket",
                    "s3:GetObject",
                    "s3:PutObject",
                    "s3:DeleteObject",
                    "s3:AbortMultipartUpload",
                )
            ),
            "s3:GetObject",  # ECR's image-layer bucket only
        ],
    },
    **{
        f"Network/Vpc/{name}": {"*": ACCOUNT_PRINCIPALS_ONLY}
        for name in ("SageMakerApi", "SageMakerRuntime", "EcrApi", "EcrDocker", "Logs", "Monitoring", "Sts")
    },
}

# What exists only with some settings: "auto_delete" where data is not retained (storage.retain_data false, dev),
# "isolated" where the network has no internet route (network.isolated, prod). (holder, principal or None for all).
ONLY_WITH: dict[str, list[tuple[str, str | None]]] = {
    "auto_delete": [
        ("Custom::S3AutoDeleteObjectsCustomResourceProvider/Role", None),
        *((f"Buckets/{name}", AUTO_DELETE) for name in ("AccessLogs", "Raw", "Datasets", "Checkpoints", "Models")),
    ],
    "isolated": [
        (f"Network/Vpc/{name}", None)
        for name in ("S3", "SageMakerApi", "SageMakerRuntime", "EcrApi", "EcrDocker", "Logs", "Monitoring", "Sts")
    ],
}

# The only Allow statements with a wildcard in an action: (holder, principal, action) -> why.
WILDCARD_ACTIONS: dict[tuple[str, str, str], str] = {
    ("DataKey/Key", "account", "kms:*"): (
        "AWS's default key policy: it delegates the key to IAM in this account (the account, not any identity); "
        "without it the key could not be administered, and KMS refuses a policy that locks the account out. "
        "Every role of this stack is granted explicit KMS actions only."
    ),
    **{
        (f"Buckets/{name}", AUTO_DELETE, action): (
            "CDK's AutoDeleteObjects provider (only where data is not retained): empties the bucket on "
            "cdk destroy; the statement, its principal (CDK's provider role) and the bucket are CDK's to choose."
        )
        for name in ("AccessLogs", "Raw", "Datasets", "Checkpoints", "Models")
        for action in AUTO_DELETE_ACTIONS
        if "*" in action
    },
    **{
        (f"Network/Vpc/{name}", "*", "*"): (
            "An endpoint policy is a ceiling, not a grant: it replaces the default (any principal, any action) "
            "with this account's principals only; each call still needs the caller's own IAM permission."
        )
        for name in ("SageMakerApi", "SageMakerRuntime", "EcrApi", "EcrDocker", "Logs", "Monitoring", "Sts")
    },
}

# Actions a role's policy grants on Resource "*", and why no narrower resource exists.
ANY_RESOURCE: dict[str, str] = {
    **{
        f"ec2:{a}": "EC2 Describe* actions have no resource-level permissions"
        for a in ("DescribeDhcpOptions", "DescribeNetworkInterfaces", "DescribeSecurityGroups", "DescribeSubnets")
    },
    "ec2:DescribeVpcs": "EC2 Describe* actions have no resource-level permissions",
    "ecr:GetAuthorizationToken": "account-wide token, no resource-level permission",
    **{
        f"servicequotas:{a}": "Service Quotas' List actions have no resource-level permission (read-only)"
        for a in ("ListServiceQuotas", "ListAWSDefaultServiceQuotas")
    },
    "sagemaker:ListTrainingJobs": "List actions have no resource-level permission (read-only)",
    "cloudwatch:PutMetricData": "no resource-level permission; limited by the cloudwatch:namespace condition",
    **{
        f"xray:{a}": "X-Ray has no resource-level permissions for tracing"
        for a in ("PutTraceSegments", "PutTelemetryRecords", "GetSamplingRules", "GetSamplingTargets")
    },
    **{
        f"logs:{a}": "CloudWatch Logs vended-log delivery (Step Functions execution logs) has no resource-level "
        "permission for these actions"
        for a in (
            "CreateLogDelivery",
            "GetLogDelivery",
            "UpdateLogDelivery",
            "DeleteLogDelivery",
            "ListLogDeliveries",
            "PutResourcePolicy",
            "DescribeResourcePolicies",
            "DescribeLogGroups",
        )
    },
}
