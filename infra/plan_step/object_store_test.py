"""The Plan step's S3 store against a stubbed S3 (botocore's Stubber holds each request and answer against botocore's
model: the control plane is the one thing faked)."""

from __future__ import annotations

import io

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from infra.plan_step.object_store import S3Store

KEY = "arn:aws:kms:us-east-1:111122223333:key/0b7a8c6e-1d2f-4a3b-9c8d-7e6f5a4b3c2d"


@pytest.fixture
def s3():
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def test_the_first_byte_is_read_and_its_kms_key_named(s3):
    client, stub = s3
    answer = {"Body": StreamingBody(io.BytesIO(b"{"), 1), "ServerSideEncryption": "aws:kms", "SSEKMSKeyId": KEY}
    stub.add_response("get_object", answer, {"Bucket": "corpora", "Key": "c4/00.jsonl", "Range": "bytes=0-0"})
    assert S3Store(client).encryption_key("s3://corpora/c4/00.jsonl") == KEY
    plain = {"Body": StreamingBody(io.BytesIO(b"{"), 1), "ServerSideEncryption": "AES256"}
    stub.add_response("get_object", plain, {"Bucket": "corpora", "Key": "c4/01.jsonl", "Range": "bytes=0-0"})
    assert S3Store(client).encryption_key("s3://corpora/c4/01.jsonl") is None


def test_a_refused_read_is_a_permission_error_with_s3s_words(s3):
    client, stub = s3
    stub.add_client_error("get_object", "AccessDenied", "Access Denied", 403)
    with pytest.raises(PermissionError, match=r"^AccessDenied: Access Denied$"):
        S3Store(client).encryption_key("s3://closed/c4/00.jsonl")
