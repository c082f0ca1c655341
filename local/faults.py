"""Faults a local run injects (``python -m local.run --inject-faults throttle,lost-endpoint``), raised as AWS
raises them, so that the definition's own Retry and Catch deal with them. What the definition makes of each:

throttle       every service call fails once with its service's throttling error before it is carried out
               (SageMaker.AmazonSageMakerException, DataSync.DataSyncException, SageMaker.SageMakerException,
               Lambda.TooManyRequestsException, SNS.AmazonSNSException); each Task's Retry absorbs it, so the
               execution ends as it would without faults.
failed-job     the first SageMaker job the execution runs ends Failed (States.TaskFailed); its Catch sends the
               execution to NotifyFailure (the failure e-mail) and Failed: the execution FAILS with that error.
lost-endpoint  the endpoint is gone when it is described: DescribeEndpoint answers ValidationException "Could not
               find endpoint" (SageMaker.SageMakerException, the name throttling has too), which its Retry tries
               five more times: FindEndpoint's Catch then creates the endpoint, and the poll after CreateEndpoint
               sends the execution to NotifyFailure: the execution FAILS.
missing-quota  the account is new: Service Quotas lists no applied SageMaker quota and AWS's default of 0 for each
               instance quota (local/quotas.py); the Plan step refuses the execution in one line naming the first
               quota it needs and the count (an InputError, e-mailed without its trace): the execution FAILS.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.workflow.errors import task_service
from local.jobs.common import JobFailed
from local.service_errors import ServiceError

KINDS = ("throttle", "failed-job", "lost-endpoint", "missing-quota")
THROTTLING_CODES = {  # the code each service throttles with (its API reference's common errors)
    "sagemaker": "ThrottlingException",
    "datasync": "ThrottlingException",
    "lambda": "TooManyRequestsException",
    "sns": "Throttled",
}


def parse_kinds(text: str) -> tuple[str, ...]:
    """``throttle,lost-endpoint`` -> the kinds (the ``--inject-faults`` option's type)."""
    kinds = tuple(kind.strip() for kind in text.split(",") if kind.strip())
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"{text!r}; expected a comma list of {', '.join(KINDS)}")
    return kinds


@dataclass(frozen=True)
class Faults:
    """The faults of one execution; ``folder`` remembers which calls already had theirs."""

    kinds: frozenset[str]
    folder: Path

    def before(self, state: str, resource: str, parameters: Any) -> None:
        """Raises the fault due before the call of ``state`` to ``resource``, if any."""
        if "throttle" in self.kinds and self._once(f"{state}.throttled", toggle=True):
            raise ServiceError(THROTTLING_CODES[task_service(resource)[1]], "Rate exceeded")
        if "failed-job" in self.kinds and resource.endswith(".sync") and self._once("failed-job"):
            raise JobFailed(f"AlgorithmError: {state}'s job failed (an injected fault)")
        if "lost-endpoint" in self.kinds and resource.endswith(":describeEndpoint"):
            raise ServiceError("ValidationException", f'Could not find endpoint "{parameters["EndpointName"]}".')

    def _once(self, marker: str, toggle: bool = False) -> bool:
        """True the first time; then False (``toggle``: and True again the time after, a call and its retry)."""
        path = self.folder / marker
        if path.exists():
            if toggle:
                path.unlink()
            return False
        self.folder.mkdir(parents=True, exist_ok=True)
        path.touch()
        return True
