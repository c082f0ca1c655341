"""The SageMaker quotas an execution will use, checked before anything is spent.

New accounts start at 0 for most SageMaker instance quotas, and a job refused its instances fails only when it
is created: an endpoint's after days of training. So the Plan step reads, from the requests it built, each instance
type and count the execution will ask for, names the quota AWS counts it against (the names of AWS's quota list,
as SageMaker's ``ResourceLimitExceeded`` quotes them: "The account-level service limit 'ml.p4d.24xlarge for
training job usage' is 0 Instances"; the list: the General Reference's "Amazon SageMaker AI endpoints and
quotas"), and refuses in one line naming the quota and the count when the account's value is lower.

The values come from Service Quotas: ListServiceQuotas (the values applied to the account), then
ListAWSDefaultServiceQuotas for the quotas never changed, which ListServiceQuotas leaves out. Neither takes a
quota's name, and GetServiceQuota needs its code (L-...), which no table here would keep up to date: the names are
matched in the pages.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

SERVICE_CODE = "sagemaker"
PAGE_SIZE = 100  # ListServiceQuotas' MaxResults at most
LIST_OPERATIONS = ("list_service_quotas", "list_aws_default_service_quotas")
# Each kind of request -> (the field that sets its instances, how AWS names the quota's use).
USES = {
    "tokenizer": ("preprocessing.instance_type", "processing job usage"),
    "shards": ("preprocessing.instance_count", "processing job usage"),
    "training": ("training.instance_count", "training job usage"),
    "endpoint_config": ("deploy.instance_count", "endpoint usage"),
}


class QuotaSource(Protocol):
    def values(self, service_code: str, names: set[str]) -> dict[str, float]:
        """The account's value of each named quota of the service (applied, else AWS's default); a name the
        service does not list is left out."""


class ServiceQuotas:
    """Service Quotas through boto3 (a client is given locally: ``local/quotas.py`` answers as AWS would)."""

    def __init__(self, client: Any = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("service-quotas")
        self._client = client

    def values(self, service_code: str, names: set[str]) -> dict[str, float]:
        found: dict[str, float] = {}
        for operation in LIST_OPERATIONS:  # applied values first; defaults only for the quotas still missing
            pages = self._client.get_paginator(operation).paginate(
                ServiceCode=service_code, PaginationConfig={"PageSize": PAGE_SIZE}
            )
            for page in pages:
                for quota in page.get("Quotas", []):
                    name = quota.get("QuotaName")
                    if name in names and name not in found and "Value" in quota:
                        found[name] = quota["Value"]
            if names <= found.keys():
                break
        return found


def quota_name(instance_type: str, use: str, spot: bool = False) -> str:
    """``ml.p4d.24xlarge for spot training job usage``: AWS's name of the quota an instance's use counts against."""
    return f"{instance_type} for {'spot ' if spot else ''}{use}"


def needed_quotas(requests: dict[str, dict], kinds: Iterable[str]) -> dict[str, tuple[str, int]]:
    """Quota name -> (the input field that sets it, the instances the execution needs at once), for the requests
    of ``kinds`` it will send. Its jobs run one after another, so a quota two of them use needs the larger count."""
    needed: dict[str, tuple[str, int]] = {}
    for kind in kinds:
        field, use = USES[kind]
        request = requests[kind]
        if kind == "endpoint_config":
            pairs = [(v["InstanceType"], v["InitialInstanceCount"], False) for v in request["ProductionVariants"]]
        elif kind == "training":
            resources = request["ResourceConfig"]
            spot = request.get("EnableManagedSpotTraining", False)
            pairs = [(resources["InstanceType"], resources["InstanceCount"], spot)]
        else:
            cluster = request["ProcessingResources"]["ClusterConfig"]
            pairs = [(cluster["InstanceType"], cluster["InstanceCount"], False)]
        for instance_type, count, spot in pairs:
            name = quota_name(instance_type, use, spot)
            if count > needed.get(name, ("", 0))[1]:
                needed[name] = (field, count)
    return needed


def quota_problem(needed: dict[str, tuple[str, int]], source: QuotaSource, account: str, region: str) -> str | None:
    """The one line that refuses the first quota below what the execution needs; None when every one suffices."""
    values = source.values(SERVICE_CODE, set(needed))
    for name, (field, count) in needed.items():
        if name not in values:
            return (
                f'{field}: {count} instances need the SageMaker quota "{name}", which Service Quotas does not list '
                f"for account {account} in {region}: the instance type is not offered there for this use; choose "
                "another"
            )
        if values[name] < count:
            return (
                f'{field}: {count} instances need the SageMaker quota "{name}" of at least {count}; account '
                f"{account} has {values[name]:g} in {region}: request an increase (Service Quotas console, Amazon "
                "SageMaker) before starting, or ask for fewer or other instances"
            )
    return None
