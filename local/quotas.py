"""Service Quotas, answered here as AWS answers the Plan step's two List calls, for the real ``ServiceQuotas``
reader (``infra/plan_step/quotas.py``) to read.

The account has, as applied values, 20 of every SageMaker instance quota the local run could ask for (each instance
type of ``infra/instances.py`` for training, spot training, processing and endpoint usage). With the ``missing-quota``
fault it is a new account: nothing applied, and AWS's default of 0 for each of those quotas, so the Plan step refuses
the execution in one line naming the first quota it needs (``make run FAULTS=missing-quota``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import botocore.session
from botocore.validate import ParamValidator

from infra.instances import INSTANCE_TYPES
from infra.plan_step.quotas import PAGE_SIZE, SERVICE_CODE, USES, quota_name

APPLIED = 20.0  # each quota's value in the local account
NEW_ACCOUNT = 0.0  # AWS's default for most SageMaker instance quotas
OPERATIONS = {
    "list_service_quotas": "ListServiceQuotas",
    "list_aws_default_service_quotas": "ListAWSDefaultServiceQuotas",
}


def local_quota_names() -> list[str]:
    uses = sorted({use for _, use in USES.values()})
    names = [quota_name(t, use) for t in INSTANCE_TYPES for use in uses]
    return sorted([*names, *(quota_name(t, "training job usage", spot=True) for t in INSTANCE_TYPES)])


class LocalServiceQuotas:
    """A ``service-quotas`` client's ``get_paginator`` for the two List operations, each request held against
    botocore's model of it, each page shaped as its output."""

    def __init__(self, new_account: bool = False) -> None:
        self.new_account = new_account
        self._model = botocore.session.get_session().get_service_model("service-quotas")

    def get_paginator(self, operation: str) -> _Paginator:
        return _Paginator(self, operation)

    def quotas(self, operation: str) -> list[dict[str, Any]]:
        if operation == "list_service_quotas" and self.new_account:
            return []  # nothing applied: ListServiceQuotas leaves out the quotas at their defaults
        value = NEW_ACCOUNT if self.new_account else APPLIED
        return [
            {"ServiceCode": SERVICE_CODE, "QuotaName": name, "QuotaCode": f"L-{i:08X}", "Value": value, "Unit": "None"}
            for i, name in enumerate(local_quota_names())
        ]

    def check(self, operation: str, request: dict[str, Any]) -> None:
        report = ParamValidator().validate(request, self._model.operation_model(OPERATIONS[operation]).input_shape)
        if report.has_errors():
            raise ValueError(report.generate_report())


class _Paginator:
    def __init__(self, client: LocalServiceQuotas, operation: str) -> None:
        self._client, self._operation = client, operation

    def paginate(self, PaginationConfig: dict | None = None, **request: Any) -> Iterator[dict[str, Any]]:
        size = (PaginationConfig or {}).get("PageSize", PAGE_SIZE)
        self._client.check(self._operation, {**request, "MaxResults": size})
        quotas = self._client.quotas(self._operation) if request.get("ServiceCode") == SERVICE_CODE else []
        for start in range(0, max(len(quotas), 1), size):
            yield {"Quotas": quotas[start : start + size]}
