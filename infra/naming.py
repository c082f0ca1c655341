"""Names of retained resources: unique to each creation of the stack, so a redeploy never meets its own."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct


def creation_suffix(scope: Construct) -> str:
    """The first 8 hex digits of the stack id's UUID, which CloudFormation draws anew each time it creates the
    stack: a resource kept by ``cdk destroy`` keeps its name, and the next stack's resource gets another."""
    stack_uuid = cdk.Fn.select(2, cdk.Fn.split("/", cdk.Stack.of(scope).stack_id))  # arn:...:stack/NAME/UUID
    return cdk.Fn.select(0, cdk.Fn.split("-", stack_uuid))


def retained_name(scope: Construct, concern: str, limit: int) -> str:
    """``<stack name>-<concern>-<creation suffix>``, the stack name shortened to fit ``limit`` characters."""
    keep = limit - len(concern) - 10  # two hyphens and the 8-digit suffix
    return f"{cdk.Stack.of(scope).stack_name[:keep]}-{concern}-{creation_suffix(scope)}"
