"""AWS console links for the stack's outputs: the state machine, the dashboard and the log groups.

Plain functions of strings; CDK tokens (ARNs, generated names) pass through unchanged, so the links resolve
at deploy time.
"""

from __future__ import annotations

import aws_cdk as cdk

TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"
PROCESSING_LOG_GROUP = "/aws/sagemaker/ProcessingJobs"


def _console(region: str, service: str, fragment: str) -> str:
    return f"https://{region}.console.aws.amazon.com/{service}/home?region={region}#{fragment}"


def _escape(value: str) -> str:
    """The console's double encoding in fragments: ``/`` -> ``$252F``, ``=`` -> ``$253D``; tokens unchanged."""
    if cdk.Token.is_unresolved(value):
        return value
    return value.replace("/", "$252F").replace("=", "$253D")


def state_machine_url(region: str, state_machine_arn: str) -> str:
    """The state machine's page: executions, their graphs and histories."""
    return _console(region, "states", f"/statemachines/view/{state_machine_arn}")


def dashboard_url(region: str, dashboard_name: str) -> str:
    return _console(region, "cloudwatch", f"dashboards/dashboard/{dashboard_name}")


def log_group_url(region: str, log_group_name: str, stream_prefix: str | None = None) -> str:
    """A log group's page; with ``stream_prefix``, only the streams whose names start with it."""
    fragment = f"logsV2:log-groups/log-group/{_escape(log_group_name)}"
    if stream_prefix:
        fragment += f"$3FlogStreamNameFilter$3D{_escape(stream_prefix)}"
    return _console(region, "cloudwatch", fragment)
