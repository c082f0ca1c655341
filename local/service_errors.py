"""An AWS API's error answer in the local run, reported under the name Step Functions gives it for the Task."""

from __future__ import annotations

from infra.workflow.errors import task_error


class ServiceError(Exception):
    """What the service answered: its error code (``ValidationException``, as botocore names it) and message."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def as_task_error(resource: str, error: ServiceError) -> dict[str, str]:
    """{"Error", "Cause"} as Step Functions reports ``error`` for a Task state with this ``Resource``."""
    name = task_error(resource, error.code)
    service = name.split(".")[0]
    return {"Error": name, "Cause": f"{error} (Service: {service}, Status Code: 400, Error Code: {error.code})"}
