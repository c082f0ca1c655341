"""The stack's S3 buckets: raw corpus, token datasets, checkpoints, models, and their access logs."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.checkov import skip_checks
from infra.config import StorageConfig

UNVERSIONED = {
    "Raw": "The corpus as uploaded: the workflow's roles (jobs, Plan) only read it, so no workflow step can "
    "overwrite or delete it; its only writers are the people who upload it.",
    "Datasets": "Derived data, rebuilt from the raw corpus by rerunning preprocessing; a rerun rewrites hundreds of "
    "GB of shards, which versioning would keep as stale copies.",
    "Checkpoints": "Tens of GB rewritten every few hundred steps and rotated by train.py; versioning would keep "
    "every superseded checkpoint. The run's product, the model archive, is in the versioned models bucket.",
}


class DataBuckets(Construct):
    """Four KMS-encrypted, TLS-only, private buckets with server access logs.

    - ``raw``: the corpus as uploaded (The Pile's jsonl.zst files).
    - ``datasets``: tokenizer, token shards and manifests written by preprocessing.
    - ``checkpoints``: training checkpoints, synced by SageMaker from /opt/ml/checkpoints.
    - ``models``: model archives, profiler output and reports (versioned).

    Args:
        key: the KMS key for the data buckets (access logs use SSE-S3, as S3 log delivery requires).
        config: removal policy (``retain_data``).
    """

    def __init__(self, scope: Construct, id: str, *, key: kms.IKey, config: StorageConfig) -> None:
        super().__init__(scope, id)
        removal = RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY
        auto_delete = not config.retain_data
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(365))],
            removal_policy=removal,
            auto_delete_objects=auto_delete,
        )
        skip_checks(
            self.access_logs,
            {
                "CKV_AWS_18": "This bucket is the access-log destination of the four data buckets; logging it too "
                "would need another log bucket, itself unlogged.",
                "CKV_AWS_21": "Written only by S3 log delivery (its policy admits logging.s3.amazonaws.com for the "
                "data buckets' prefixes alone) and expired after a year; no workflow role can read or write it.",
            },
        )

        def data_bucket(name: str, *, versioned: bool = False) -> s3.Bucket:
            bucket = s3.Bucket(
                self,
                name,
                encryption=s3.BucketEncryption.KMS,
                encryption_key=key,
                bucket_key_enabled=True,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                enforce_ssl=True,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                versioned=versioned,
                server_access_logs_bucket=self.access_logs,
                server_access_logs_prefix=f"{name.lower()}/",
                lifecycle_rules=[s3.LifecycleRule(abort_incomplete_multipart_upload_after=Duration.days(7))],
                removal_policy=removal,
                auto_delete_objects=auto_delete,
            )
            if not versioned:
                skip_checks(bucket, {"CKV_AWS_21": UNVERSIONED[name]})
            return bucket

        self.raw = data_bucket("Raw")
        self.datasets = data_bucket("Datasets")
        self.checkpoints = data_bucket("Checkpoints")
        self.models = data_bucket("Models", versioned=True)

    @property
    def data_buckets(self) -> dict[str, s3.Bucket]:
        return {"raw": self.raw, "datasets": self.datasets, "checkpoints": self.checkpoints, "models": self.models}
