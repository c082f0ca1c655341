"""Reads every IAM statement out of a synthesized template, with stable names for principals and resources.

Identity policies (``AWS::IAM::Policy``, a role's inline ``Policies`` and ``ManagedPolicyArns``) are attributed
to their role; resource policies (KMS key policy, bucket and topic policies, a function's permissions,
CloudWatch Logs' resource policies) to the resource they protect.
Names are construct paths without the stack name, the trailing ``/Resource`` and the logical-id hash, so they
stay put when a construct moves in the template; intrinsics are rendered as ``${path}`` / ``${path.Attr}``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from infra.config import PLACEHOLDER_ACCOUNT

ACCOUNT, REGION = PLACEHOLDER_ACCOUNT, "us-east-1"  # the environment the test stages synthesize for
ASSET_HASH = re.compile(r"[0-9a-f]{64}")


@dataclasses.dataclass(frozen=True)
class Statement:
    """One policy statement, flattened.

    Attributes:
        holder: the role (identity policy) or resource (resource policy) the statement belongs to.
        principal: for resource policies, who it admits (``service:...``, ``account``, ``role:...``, ``*``).
        effect: ``Allow`` or ``Deny``.
        actions, resources: sorted, rendered.
        conditions: operator -> key -> rendered value.
        source: the policy's construct path.
    """

    holder: str
    principal: str
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    conditions: dict
    source: str

    @property
    def condition_keys(self) -> tuple[str, ...]:
        return tuple(sorted(key for by_key in self.conditions.values() for key in by_key))

    @property
    def identity(self) -> bool:
        return self.principal == ""


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


class PolicyReader:
    """The statements of one template."""

    def __init__(self, template: dict[str, Any]) -> None:
        self.resources: dict[str, dict] = template["Resources"]

    def name(self, logical_id: str) -> str:
        """``GptPretraining-dev/SageMakerExecution/Role/Resource`` -> ``SageMakerExecution/Role``."""
        path = self.resources[logical_id].get("Metadata", {}).get("aws:cdk:path")
        if not path:
            return logical_id
        parts = path.split("/")[1:]
        if parts and parts[-1] in ("Resource", "Default"):
            parts = parts[:-1]
        return "/".join(parts)

    def render(self, value: Any) -> str:
        """A policy value as text, intrinsics by construct name, this test's account and region as variables."""
        if isinstance(value, str):
            value = ASSET_HASH.sub("<asset-hash>", value)
            return value.replace(ACCOUNT, "${AWS::AccountId}").replace(REGION, "${AWS::Region}")
        if isinstance(value, dict) and len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                return "${" + (self.name(arg) if arg in self.resources else arg) + "}"
            if fn == "Fn::GetAtt":
                return "${" + self.name(arg[0]) + "." + arg[1] + "}"
            if fn == "Fn::Join":
                return self.render(arg[0].join(self.render(v) for v in arg[1]))
            if fn == "Fn::Sub":
                return self.render(arg)
        raise ValueError(f"cannot render {value!r}")

    def principals(self, principal: Any) -> list[str]:
        """Each principal a statement names (IAM merges statements that differ only in their service principals)."""
        if isinstance(principal, dict) and len(principal) == 1:
            ((kind, value),) = principal.items()
            if isinstance(value, list):
                return [self.principal({kind: v}) for v in value]
        return [self.principal(principal)]

    def principal(self, principal: Any) -> str:
        if principal == "*" or principal == {"AWS": "*"}:
            return "*"
        ((kind, value),) = principal.items()
        rendered = self.render(value)
        if kind == "Service":
            return f"service:{rendered}"
        if rendered.endswith(":root"):
            return "account"
        if rendered.startswith("${") and rendered.endswith(".Arn}"):
            return "role:" + rendered[2 : -len(".Arn}")]
        return f"{kind}:{rendered}"

    def _statement(self, holder: str, principal: str, raw: dict, source: str) -> Statement:
        return Statement(
            holder=holder,
            principal=principal,
            effect=raw["Effect"],
            actions=tuple(sorted(_listed(raw["Action"]))),
            resources=tuple(sorted(self.render(r) for r in _listed(raw["Resource"]))),
            conditions={
                op: {key: [self.render(v) for v in _listed(val)] for key, val in by_key.items()}
                for op, by_key in raw.get("Condition", {}).items()
            },
            source=source,
        )

    def roles(self) -> dict[str, dict]:
        """Role name -> its trust statements and managed policies."""
        roles = {}
        for logical_id, r in self.resources.items():
            if r["Type"] != "AWS::IAM::Role":
                continue
            props = r["Properties"]
            trust = [
                (self.principal(s["Principal"]), tuple(sorted(k for c in s.get("Condition", {}).values() for k in c)))
                for s in props["AssumeRolePolicyDocument"]["Statement"]
            ]
            managed = sorted(self.render(arn).split(":policy/")[-1] for arn in props.get("ManagedPolicyArns", []))
            roles[self.name(logical_id)] = {"trust": trust, "managed": managed}
        return roles

    def statements(self) -> list[Statement]:
        """Every statement of every identity and resource policy in the template."""
        out: list[Statement] = []
        for logical_id, r in self.resources.items():
            kind, props = r["Type"], r.get("Properties", {})
            source = self.name(logical_id)
            if kind == "AWS::IAM::Role":
                for inline in props.get("Policies", []):
                    out += [self._statement(source, "", s, source) for s in inline["PolicyDocument"]["Statement"]]
            elif kind == "AWS::IAM::Policy":
                for role in props.get("Roles", []):
                    holder = self.name(role["Ref"])
                    out += [self._statement(holder, "", s, source) for s in props["PolicyDocument"]["Statement"]]
            elif kind == "AWS::KMS::Key":
                for s in props["KeyPolicy"]["Statement"]:
                    out += [self._statement(source, p, s, source) for p in self.principals(s["Principal"])]
            elif kind == "AWS::EC2::VPCEndpoint" and "PolicyDocument" in props:
                for s in props["PolicyDocument"]["Statement"]:
                    out += [self._statement(source, p, s, source) for p in self.principals(s["Principal"])]
            elif kind in ("AWS::S3::BucketPolicy", "AWS::SNS::TopicPolicy"):
                targets = [props["Bucket"]] if "Bucket" in props else props["Topics"]
                for target in targets:
                    holder = self.render(target).strip("${}")
                    for s in props["PolicyDocument"]["Statement"]:
                        out += [self._statement(holder, p, s, source) for p in self.principals(s["Principal"])]
            elif kind == "AWS::Lambda::Permission":  # one statement of the function's resource policy
                holder = self.render(props["FunctionName"]).strip("${}").removesuffix(".Arn")
                raw = {"Effect": "Allow", "Action": props["Action"], "Resource": props["FunctionName"]}
                if "SourceArn" in props:  # Lambda's AddPermission turns SourceArn into this condition
                    raw["Condition"] = {"ArnLike": {"aws:SourceArn": props["SourceArn"]}}
                out.append(self._statement(holder, self.principal({"Service": props["Principal"]}), raw, source))
            elif kind == "AWS::Logs::ResourcePolicy":  # a JSON string, tokens joined in; held by what it names
                for s in json.loads(self.render(props["PolicyDocument"]))["Statement"]:
                    for resource in _listed(s["Resource"]):
                        holder = resource.removeprefix("${").removesuffix(".Arn}")
                        out += [self._statement(holder, p, s, source) for p in self.principals(s["Principal"])]
            elif {"PolicyDocument", "FileSystemPolicy", "Policy"} & set(props):
                raise AssertionError(f"{source}: {kind} carries a policy this reader does not know; add it")
        return out


def entry(statement: Statement, action: str) -> str:
    """How the reviewed list writes one action of a statement: ``[deny ]action[ if key, key]``."""
    keys = statement.condition_keys
    return f"{'deny ' if statement.effect == 'Deny' else ''}{action}{' if ' + ', '.join(keys) if keys else ''}"


def permissions(statements: list[Statement]) -> dict[str, dict[str, set[str]]]:
    """holder -> principal (``self`` for a role's own policies) -> reviewed-list entries."""
    out: dict[str, dict[str, set[str]]] = {}
    for s in statements:
        by_principal = out.setdefault(s.holder, {}).setdefault(s.principal or "self", set())
        by_principal.update(entry(s, a) for a in s.actions)
    return out
