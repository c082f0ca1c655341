"""The synthesized stack, brought to this machine: its resources get local names, its assets a local bucket.

``cdk synth`` writes the template and the assets to ``cdk.out``. Here, as ``cdk deploy`` would in AWS,
file assets are published to the (local) assets bucket and every CloudFormation reference is resolved
to the name of a local stand-in: a bucket is a folder of the object store, the Plan function is the
handler in ``infra/plan_step/plan.py``, the file system is a folder.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.plan_step.settings import SETTINGS_ENV, SETTINGS_FILE, StackSettings
from local.definition import resolve_definition, resolve_value
from local.folder_store import FolderStore

HASH_SUFFIX = re.compile(r"[0-9A-F]{8}$")


@dataclass
class LocalStack:
    """A synthesized stack and the folder-backed resources that stand in for its AWS resources.

    Args:
        template: the stack's CloudFormation template.
        assets_manifest: ``<stack>.assets.json`` from cdk.out.
        cdk_out: the cloud assembly folder.
        region, account: the stack's environment.
    """

    template: dict[str, Any]
    assets_manifest: dict[str, Any]
    cdk_out: Path
    region: str
    account: str

    @classmethod
    def load(cls, cdk_out: Path, stack_name: str) -> LocalStack:
        template = json.loads((cdk_out / f"{stack_name}.template.json").read_text())
        assets = json.loads((cdk_out / f"{stack_name}.assets.json").read_text())
        manifest = json.loads((cdk_out / "manifest.json").read_text())
        environment = manifest["artifacts"][stack_name]["environment"]  # aws://account/region
        account, region = environment.removeprefix("aws://").split("/")
        return cls(template, assets, cdk_out, region, account)

    def local_name(self, logical_id: str, attribute: str | None = None) -> str:
        """The stand-in for ``Ref``/``Fn::GetAtt`` of a resource, shaped like the real value."""
        kind = self.template["Resources"][logical_id]["Type"]
        short = HASH_SUFFIX.sub("", logical_id).lower()
        if kind == "AWS::S3::Bucket":
            return f"local-{short}"
        if kind == "AWS::EFS::FileSystem":
            return "fs-local"
        if kind == "AWS::EC2::Subnet":
            return f"subnet-{short}"
        if kind == "AWS::EC2::SecurityGroup":
            return f"sg-{short}"
        return f"arn:aws:local:{self.region}:{self.account}:{short}"

    def definition(self) -> dict[str, Any]:
        """The state machine definition exactly as Step Functions would receive it, with local names."""
        return resolve_definition(self.template, self.region, self.account, self.local_name)

    def _plan_function(self) -> tuple[str, dict[str, Any]]:
        """(logical id, resource) of the function that carries the workflow settings."""
        for logical_id, resource in self.template["Resources"].items():
            variables = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
            if resource["Type"] == "AWS::Lambda::Function" and SETTINGS_ENV in variables:
                return logical_id, resource
        raise ValueError("the template has no Plan function")

    def settings(self) -> StackSettings:
        """The Plan function's settings as it reads them: its environment variable in the template, resolved,
        and the settings file in its code asset."""
        _, function = self._plan_function()
        value = function["Properties"]["Environment"]["Variables"][SETTINGS_ENV]
        asset = self.assets_manifest["files"][function["Properties"]["Code"]["S3Key"].removesuffix(".zip")]
        bundled = (self.cdk_out / asset["source"]["path"] / SETTINGS_FILE).read_text()
        return StackSettings.from_parts(resolve_value(value, self.region, self.account, self.local_name), bundled)

    def plan_function_name(self) -> str:
        """The local name of the Plan function, as the definition's Task resource refers to it."""
        return self.local_name(self._plan_function()[0], "Arn")

    def publish_assets(self, store: FolderStore) -> None:
        """What ``cdk deploy`` does first: copy each file asset to its bucket and key."""
        for asset in self.assets_manifest.get("files", {}).values():
            source = self.cdk_out / asset["source"]["path"]
            if asset["source"].get("packaging") != "file" or not source.is_file():
                continue  # zipped Lambda code of CDK's own custom resources: nothing runs it here
            for destination in asset["destinations"].values():
                target = store.path(f"s3://{destination['bucketName']}/{destination['objectKey']}")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
