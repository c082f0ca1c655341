"""The Plan step refuses, before anything is spent, an execution whose instances a SageMaker quota does not cover."""

from __future__ import annotations

import pytest
from botocore.session import get_session
from botocore.stub import Stubber

from infra.plan_step.plan import InputError, plan_execution
from infra.plan_step.quotas import SERVICE_CODE, ServiceQuotas, needed_quotas, quota_name
from local.folder_store import FolderStore
from local.quotas import LocalServiceQuotas

CORPUS = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}}


@pytest.fixture
def store(tmp_path) -> FolderStore:
    store = FolderStore(tmp_path)
    for i in range(4):
        store.put_text(f"s3://raw-bucket/pile/{i:02d}.jsonl.zst", "x")
    return store


class Quotas:
    """The account's quotas by name; every name asked for, remembered."""

    def __init__(self, **values: float) -> None:
        self.known, self.asked = values, set()

    def values(self, service_code: str, names: set[str]) -> dict[str, float]:
        assert service_code == SERVICE_CODE
        self.asked |= names
        return {name: value for name, value in self.known.items() if name in names}


def test_every_quota_the_execution_uses_is_asked_for_by_aws_name_and_count(settings, store):
    raw = {**CORPUS, "deploy": True, "training": {"spot": True}}
    plan = plan_execution(raw, "exec-1", settings, store)
    needed = needed_quotas(plan["requests"], ["tokenizer", "shards", "training", "endpoint_config"])
    assert needed == {  # dev: 2 x ml.c5.4xlarge preprocessing, 1 x ml.g5.12xlarge spot training, the endpoint
        "ml.c5.4xlarge for processing job usage": ("preprocessing.instance_count", 2),
        "ml.g5.12xlarge for spot training job usage": ("training.instance_count", 1),
        "ml.g5.xlarge for endpoint usage": ("deploy.instance_count", 1),
    }
    quotas = Quotas(**{name: 8 for name in needed})
    plan_execution(raw, "exec-1", settings, store, quotas)
    assert quotas.asked == set(needed)
    on_demand = plan_execution({**CORPUS, "training": {"spot": False}}, "exec-2", settings, store)
    assert needed_quotas(on_demand["requests"], ["training"]) == {
        "ml.g5.12xlarge for training job usage": ("training.instance_count", 1)
    }


def test_a_quota_below_the_count_refuses_the_execution_in_one_line_naming_it(settings, store):
    quotas = Quotas(**{"ml.c5.4xlarge for processing job usage": 2, "ml.g5.12xlarge for spot training job usage": 8})
    quotas.known["ml.g5.xlarge for endpoint usage"] = 0  # a new account's
    with pytest.raises(InputError) as refused:
        plan_execution({**CORPUS, "deploy": True}, "exec-1", settings, store, quotas)
    assert str(refused.value) == (
        'deploy.instance_count: 1 instances need the SageMaker quota "ml.g5.xlarge for endpoint usage" of at least 1; '
        "account 123456789012 has 0 in us-east-1: request an increase (Service Quotas console, Amazon SageMaker) "
        "before starting, or ask for fewer or other instances"
    )
    assert not store.list("s3://datasets-bucket/inputs/")  # refused before anything is written
    del quotas.known["ml.g5.xlarge for endpoint usage"]
    with pytest.raises(InputError, match=r'"ml.g5.xlarge for endpoint usage", which Service Quotas does not list'):
        plan_execution({**CORPUS, "deploy": True}, "exec-1", settings, store, quotas)


def test_a_model_trained_earlier_needs_only_the_endpoints_quota(settings, store):
    job = "gpt-dev-exec-0-abc123-trn"
    store.put_text(f"s3://models-bucket/training/{job}/output/model.tar.gz", "archive")
    quotas = Quotas(**{"ml.g5.xlarge for endpoint usage": 1})
    plan = plan_execution({"deploy_from": job}, "exec-1", settings, store, quotas)
    assert quotas.asked == {"ml.g5.xlarge for endpoint usage"} and plan["train"] is False


def test_the_reader_sends_service_quotas_what_its_model_accepts_and_finds_defaults_after_applied_values():
    client = get_session().create_client("service-quotas", region_name="us-east-1")
    name = quota_name("ml.p4d.24xlarge", "training job usage", spot=True)
    applied = {"Quotas": [{"QuotaName": "ml.c5.xlarge for processing job usage", "Value": 4.0}]}
    defaults = {"Quotas": [{"QuotaName": name, "Value": 0.0, "QuotaCode": "L-00000000"}]}
    request = {"ServiceCode": "sagemaker", "MaxResults": 100}
    with Stubber(client) as stub:  # Stubber holds each request and answer against botocore's model
        stub.add_response("list_service_quotas", applied, request)
        stub.add_response("list_aws_default_service_quotas", defaults, request)
        assert ServiceQuotas(client).values("sagemaker", {name}) == {name: 0.0}
        stub.assert_no_pending_responses()


def test_the_local_account_has_every_quota_and_a_new_one_none(settings, store):
    names = {quota_name("ml.m5.xlarge", "training job usage"), quota_name("ml.g5.xlarge", "endpoint usage")}
    assert ServiceQuotas(LocalServiceQuotas()).values("sagemaker", names) == dict.fromkeys(names, 20.0)
    assert ServiceQuotas(LocalServiceQuotas(new_account=True)).values("sagemaker", names) == dict.fromkeys(names, 0)
