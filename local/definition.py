"""The state machine definition, taken from a synthesized template with its CloudFormation references resolved.

The template holds the definition as ``Fn::Join`` of strings and references (``Ref``, ``Fn::GetAtt``).
Resolving each reference to a name of our choosing gives the exact JSON Step Functions would run; the
local run maps those names to local handlers, and the validator checks the result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

PSEUDO_PARAMETERS = {"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}


def local_arn(logical_id: str, attribute: str | None = None) -> str:
    """The stand-in for a stack resource: ``arn:aws:local:::PlanFunction74A84C0D`` (``.Arn`` dropped)."""
    suffix = "" if attribute in (None, "Arn") else f".{attribute}"
    return f"arn:aws:local:::{logical_id}{suffix}"


def find_state_machine(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The (logical id, resource) of the template's only state machine."""
    machines = [(k, r) for k, r in template["Resources"].items() if r["Type"] == "AWS::StepFunctions::StateMachine"]
    if len(machines) != 1:
        raise ValueError(f"expected one state machine in the template, found {len(machines)}")
    return machines[0]


def resolve_definition(
    template: dict[str, Any], region: str, account: str, name_of: Callable[[str, str | None], str] = local_arn
) -> dict[str, Any]:
    """The state machine's definition as a dict, every reference replaced by ``name_of(logical_id, attribute)``."""
    pseudo = {**PSEUDO_PARAMETERS, "AWS::Region": region, "AWS::AccountId": account}

    def resolve(part: Any) -> str:
        if isinstance(part, str):
            return part
        if "Ref" in part:
            return pseudo.get(part["Ref"]) or name_of(part["Ref"], None)
        if "Fn::GetAtt" in part:
            logical_id, attribute = part["Fn::GetAtt"]
            return name_of(logical_id, attribute)
        raise ValueError(f"cannot resolve {part!r} in the state machine definition")

    _, machine = find_state_machine(template)
    definition = machine["Properties"]["DefinitionString"]
    if isinstance(definition, dict):
        separator, parts = definition["Fn::Join"]
        definition = separator.join(resolve(p) for p in parts)
    return json.loads(definition)
