"""Builds the CDK app: one stack for the stage chosen with ``-c stage=NAME``, checked by cdk-nag."""

from __future__ import annotations

import aws_cdk as cdk

from infra.config import StageConfig
from infra.nag import enable_nag
from infra.stack import PretrainingStack

CONTEXT_KEYS = ("stage", "stages", "config")


def stack_name(config: StageConfig) -> str:
    return f"GptPretraining-{config.name}"


def build_app(app: cdk.App, config: StageConfig) -> PretrainingStack:
    """Adds the stage's stack to ``app`` and turns on cdk-nag; returns the stack."""
    stack = PretrainingStack(app, stack_name(config), config=config)
    cdk.Tags.of(stack).add("project", "gpt-pretraining")
    cdk.Tags.of(stack).add("stage", config.name)
    enable_nag(app)
    _mark_cdk_provider_lint(stack)
    return stack


def _mark_cdk_provider_lint(stack: cdk.Stack) -> None:
    """CDK's own custom-resource providers (auto-delete objects, restrict default SG) declare a DependsOn on
    their role that a GetAtt already implies; cfn-lint warns (W3005) about code we do not write, so those
    generated functions, and only they, carry an ignore for that one rule."""
    for construct in stack.node.find_all():
        if (
            isinstance(construct, cdk.CfnResource)
            and construct.cfn_resource_type == "AWS::Lambda::Function"
            and "CustomResourceProvider" in construct.node.id + construct.node.scope.node.id
        ):
            construct.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})
