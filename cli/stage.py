"""The deployed stage a command talks to: its configuration (from cdk.json) and an AWS session in its region."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infra.config import StageConfig, load_stage_config

CDK_JSON = Path(__file__).resolve().parent.parent / "cdk.json"


def stage_config(stage: str) -> StageConfig:
    """The stage's validated configuration; an unknown stage is a ConfigError naming the valid ones."""
    return load_stage_config({**json.loads(CDK_JSON.read_text())["context"], "stage": stage})


def stage_session(stage: str) -> Any:
    """A boto3 session in the stage's region (credentials from the usual chain)."""
    import boto3

    return boto3.Session(region_name=stage_config(stage).region)


def caller_identity(stage: str, session: Any = None) -> str:
    """The account and principal of the credentials in use; no credentials raise botocore's error."""
    identity = (session or stage_session(stage)).client("sts").get_caller_identity()
    return f"account {identity['Account']}, {identity['Arn']}"
