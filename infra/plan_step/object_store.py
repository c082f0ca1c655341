"""The object-store operations the Plan step needs, and S3's (the local run's folder: ``local/folder_store.py``)."""

from __future__ import annotations

from typing import Protocol


def split_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/some/key`` -> (``bucket``, ``some/key``)."""
    if not uri.startswith("s3://"):
        raise ValueError(f"{uri!r} is not an s3:// URI")
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


DELETE_BATCH = 1000  # DeleteObjects takes at most 1,000 keys


class ObjectStore(Protocol):
    def list(self, prefix_uri: str) -> list[tuple[str, int]]:
        """(URI, size in bytes) of every object under the prefix, sorted by URI."""

    def put_text(self, uri: str, text: str) -> None: ...

    def read_bytes(self, uri: str) -> bytes:
        """The object's content."""

    def delete(self, uris: list[str]) -> None:
        """Deletes the objects (of one bucket); a versioned bucket keeps them as noncurrent versions."""

    def encryption_key(self, uri: str) -> str | None:
        """Reads the object's first byte, as a job reads it, and returns the ARN of the KMS key it is encrypted
        with (None: not with KMS); a PermissionError says why it could not be read."""


class S3Store:
    """The real thing, through boto3 (present in every Lambda Python runtime)."""

    def __init__(self, client=None):
        import boto3

        self._s3 = client or boto3.client("s3")

    def list(self, prefix_uri: str) -> list[tuple[str, int]]:
        bucket, prefix = split_uri(prefix_uri)
        objects = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            objects += [(f"s3://{bucket}/{o['Key']}", o["Size"]) for o in page.get("Contents", [])]
        return sorted(objects)

    def put_text(self, uri: str, text: str) -> None:
        bucket, key = split_uri(uri)
        self._s3.put_object(Bucket=bucket, Key=key, Body=text.encode())

    def read_bytes(self, uri: str) -> bytes:
        bucket, key = split_uri(uri)
        return self._s3.get_object(Bucket=bucket, Key=key)["Body"].read()

    def encryption_key(self, uri: str) -> str | None:
        from botocore.exceptions import ClientError

        bucket, key = split_uri(uri)
        try:
            answer = self._s3.get_object(Bucket=bucket, Key=key, Range="bytes=0-0")
        except ClientError as error:  # AccessDenied: the bucket's policy, or the object's KMS key
            raise PermissionError(f"{error.response['Error']['Code']}: {error.response['Error']['Message']}") from error
        answer["Body"].close()
        return answer.get("SSEKMSKeyId")

    def delete(self, uris: list[str]) -> None:
        for start in range(0, len(uris), DELETE_BATCH):
            batch = [split_uri(uri) for uri in uris[start : start + DELETE_BATCH]]
            objects = [{"Key": key} for _, key in batch]
            answer = self._s3.delete_objects(Bucket=batch[0][0], Delete={"Objects": objects, "Quiet": True})
            if answer.get("Errors"):
                kept, first = len(answer["Errors"]), answer["Errors"][0]
                raise OSError(f"S3 kept {kept} object(s), e.g. {first.get('Key')}: {first.get('Code')}")
