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
# The local stack's id, as CloudFormation shapes one (``arn:...:stack/NAME/UUID``): the creation suffix of
# ``infra/naming.py`` reads its UUID.
LOCAL_STACK_UUID = "10ca1000-0000-4000-8000-000000000000"


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


def resolve_value(value: Any, region: str, account: str, name_of: Callable[[str, str | None], str] = local_arn) -> Any:
    """A template value (plain, ``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Select`` or ``Fn::Split`` of those) as a
    plain string (a list, for ``Fn::Split``)."""
    stack_id = f"arn:aws:cloudformation:{region}:{account}:stack/local/{LOCAL_STACK_UUID}"
    pseudo = {**PSEUDO_PARAMETERS, "AWS::Region": region, "AWS::AccountId": account, "AWS::StackId": stack_id}
    if isinstance(value, str):
        return value
    if "Fn::Select" in value:
        index, items = value["Fn::Select"]
        return resolve_value(items, region, account, name_of)[int(index)]
    if "Fn::Split" in value:
        separator, text = value["Fn::Split"]
        return resolve_value(text, region, account, name_of).split(separator)
    if "Ref" in value:
        return pseudo.get(value["Ref"]) or name_of(value["Ref"], None)
    if "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        return name_of(logical_id, attribute)
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(resolve_value(p, region, account, name_of) for p in parts)
    raise ValueError(f"cannot resolve {value!r}")


def resolve_definition(
    template: dict[str, Any], region: str, account: str, name_of: Callable[[str, str | None], str] = local_arn
) -> dict[str, Any]:
    """The state machine's definition as a dict, every reference replaced by ``name_of(logical_id, attribute)``."""
    _, machine = find_state_machine(template)
    return json.loads(resolve_value(machine["Properties"]["DefinitionString"], region, account, name_of))
