"""The stack's S3 buckets: raw corpus, token datasets, checkpoints, models, and their access logs."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.checkov import skip_checks
from infra.config import StorageConfig
from infra.nag import acknowledge_compliance

RAW_UNVERSIONED = (
    "The corpus as uploaded: the workflow's roles (jobs, Plan) only read it, so no workflow step can overwrite or "
    "delete it; its only writers are the people who upload it."
)
ACCESS_LOGS_UNVERSIONED = (
    "Written only by S3 log delivery (its policy admits logging.s3.amazonaws.com for the data buckets' prefixes "
    "alone) and expired after a year; no workflow role can read or write it."
)
# Days a superseded or deleted object version is kept: long enough to notice a rerun or a resumed run that
# overwrote the wrong prefix and restore it, short enough that storage does not keep growing.
NONCURRENT_DAYS = {"Datasets": 7, "Checkpoints": 3, "Models": 30}
# Why no bucket replicates to a second region (the compliance packs' S3BucketReplicationEnabled).
NOT_REPLICATED = {
    "AccessLogs": "Server access logs (best-effort delivery) kept a year for investigations; the account's "
    "CloudTrail, outside this stack, is the audit record. A replica would double logs nobody restores.",
    "Raw": "The corpus is a copy of text its owners keep at the source they uploaded it from; a replica would double "
    "the largest bucket (up to TBs) and put possibly regulated text in a region nobody chose for it.",
    "Datasets": "Derived data, rebuilt from the raw corpus by rerunning preprocessing (hours of CPU), and versioned "
    "against overwrites; a second region would double hundreds of GB of shards that can be made again.",
    "Checkpoints": "Intermediate training state, superseded every few hundred steps and versioned against "
    "overwrites; the cluster that would resume from it runs in this region, so a replica elsewhere restores nothing.",
    "Models": "Versioned and retained, which covers deletion and overwrite. A copy in a second region is a "
    "disaster-recovery and data-residency decision (its own bucket, key and review) that the stack leaves to owners.",
}


class DataBuckets(Construct):
    """Four KMS-encrypted, TLS-only, private buckets with server access logs.

    - ``raw``: the corpus as uploaded (The Pile's jsonl.zst files).
    - ``datasets``: tokenizer, token shards and manifests written by preprocessing.
    - ``checkpoints``: training checkpoints, synced by SageMaker from /opt/ml/checkpoints.
    - ``models``: model archives, profiler output and reports.

    Datasets, checkpoints and models are versioned, their superseded versions expired after
    ``NONCURRENT_DAYS``.

    Args:
        key: the KMS key for the data buckets (access logs use SSE-S3, as S3 log delivery requires).
        config: removal policy (``retain_data``), and the retained buckets to adopt (``existing``), which keep
            the settings they were made with and get their bucket policies again.
    """

    def __init__(self, scope: Construct, id: str, *, key: kms.IKey, config: StorageConfig) -> None:
        super().__init__(scope, id)
        self.raw: s3.IBucket
        self.datasets: s3.IBucket
        self.checkpoints: s3.IBucket
        self.models: s3.IBucket
        if config.existing.access_logs_bucket:
            self._adopt(config.existing.buckets, key)
            return
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
                "CKV_AWS_21": ACCESS_LOGS_UNVERSIONED,
            },
        )
        acknowledge_compliance(
            self.access_logs,
            {
                "S3BucketVersioningEnabled": ACCESS_LOGS_UNVERSIONED,
                "S3DefaultEncryptionKMS": "S3 server access log delivery writes only to a destination bucket "
                "encrypted with SSE-S3; SSE-KMS is not supported there. The logs hold request metadata, no data.",
                "S3BucketReplicationEnabled": NOT_REPLICATED["AccessLogs"],
            },
        )

        def data_bucket(name: str) -> s3.Bucket:
            versioned = name in NONCURRENT_DAYS
            rules = [s3.LifecycleRule(abort_incomplete_multipart_upload_after=Duration.days(7))]
            if versioned:
                rules.append(
                    s3.LifecycleRule(
                        noncurrent_version_expiration=Duration.days(NONCURRENT_DAYS[name]),
                        expired_object_delete_marker=True,
                    )
                )
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
                lifecycle_rules=rules,
                removal_policy=removal,
                auto_delete_objects=auto_delete,
            )
            acknowledge_compliance(bucket, {"S3BucketReplicationEnabled": NOT_REPLICATED[name]})
            return bucket

        self.raw = data_bucket("Raw")
        skip_checks(self.raw, {"CKV_AWS_21": RAW_UNVERSIONED})
        acknowledge_compliance(self.raw, {"S3BucketVersioningEnabled": RAW_UNVERSIONED})
        self.datasets = data_bucket("Datasets")
        self.checkpoints = data_bucket("Checkpoints")
        self.models = data_bucket("Models")

    def _adopt(self, names: dict[str, str | None], key: kms.IKey) -> None:
        """The retained buckets with the policies the destroyed stack deleted: TLS only, and log delivery."""
        adopted = {
            id: s3.Bucket.from_bucket_attributes(
                self, id, bucket_name=name, encryption_key=None if id == "AccessLogs" else key
            )
            for id, name in names.items()
        }
        for id, bucket in adopted.items():
            policy = s3.BucketPolicy(self, f"{id}Policy", bucket=bucket)
            policy.document.add_statements(
                iam.PolicyStatement(
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=["s3:*"],
                    resources=[bucket.bucket_arn, bucket.arn_for_objects("*")],
                    conditions={"Bool": {"aws:SecureTransport": "false"}},
                )
            )
            if id == "AccessLogs":
                policy.document.add_statements(
                    *(
                        iam.PolicyStatement(
                            principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")],
                            actions=["s3:PutObject"],
                            resources=[bucket.arn_for_objects(f"{source.lower()}/*")],
                            conditions={
                                "ArnLike": {"aws:SourceArn": adopted[source].bucket_arn},
                                "StringEquals": {"aws:SourceAccount": Stack.of(self).account},
                            },
                        )
                        for source in adopted
                        if source != "AccessLogs"
                    )
                )
        self.access_logs = adopted["AccessLogs"]
        self.raw, self.datasets = adopted["Raw"], adopted["Datasets"]
        self.checkpoints, self.models = adopted["Checkpoints"], adopted["Models"]

    @property
    def data_buckets(self) -> dict[str, s3.IBucket]:
        return {"raw": self.raw, "datasets": self.datasets, "checkpoints": self.checkpoints, "models": self.models}
