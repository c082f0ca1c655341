"""Builds the CDK app: one stack for the stage chosen with ``-c stage=NAME``, checked by cdk-nag."""

from __future__ import annotations

import aws_cdk as cdk

from infra.config import StageConfig
from infra.nag import enable_nag
from infra.stack import PretrainingStack

CONTEXT_KEYS = ("stage", "stages", "config")


def build_app(app: cdk.App, config: StageConfig) -> PretrainingStack:
    """Adds the stage's stack to ``app`` and turns on cdk-nag; returns the stack."""
    stack = PretrainingStack(app, config.stack_name, config=config)
    cdk.Tags.of(stack).add("project", "gpt-pretraining")
    cdk.Tags.of(stack).add("stage", config.name)
    enable_nag(app, config.security.compliance_packs)
    return stack
