"""The stage's one endpoint over several executions, run by the real interpreter with the local run's hosting:
the first deploying execution creates it, the next updates it in place and removes what it served before, a model
that fails leaves the old one serving; so runs never add endpoints that bill."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from local.definition import resolve_definition
from local.folder_store import FolderStore
from local.tasks import RunContext
from tests.hosting_tasks import ARCHIVE
from tests.synth import ROOT, synth_template


@pytest.fixture(scope="module")
def definition_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("definition") / "definition.json"
    path.write_text(json.dumps(resolve_definition(synth_template("dev"), "us-east-1", "123456789012")))
    return path


def put_model(store: FolderStore, execution_name: str, text: str) -> None:
    from infra.plan_step.names import resource_names

    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        member = tarfile.TarInfo("model.txt")
        member.size = len(text)
        tar.addfile(member, io.BytesIO(text.encode()))
    uri = ARCHIVE.format(resource_names("gpt-dev", execution_name, "0ff11e00")["training"])
    store.path(uri).parent.mkdir(parents=True, exist_ok=True)
    store.path(uri).write_bytes(archive.getvalue())


def execute(definition_file: Path, runs: Path, name: str, model: str = "answers") -> tuple[dict, str]:
    """One execution named ``name`` in the run folder ``runs`` (its hosting outlives it): (result, console)."""
    folder = runs / "executions" / name
    folder.mkdir(parents=True)
    put_model(FolderStore(runs / "s3"), name, model)
    context = RunContext("", "", str(runs / "s3"), str(runs / "efs"), str(folder))
    (folder / "context.json").write_text(json.dumps(dataclasses.asdict(context)))
    (folder / "input.json").write_text("{}")
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT), "LOCAL_TASKS": "tests.hosting_tasks"}
    run = subprocess.run(
        [str(ROOT / "node_modules/.bin/node"), str(ROOT / "local/run_state_machine.mjs"), str(definition_file),
         str(folder / "input.json"), str(folder / "context.json"), name, str(folder / "result.json")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return json.loads((folder / "result.json").read_text()), run.stdout + run.stderr


def listing(runs: Path, kind: str) -> list[str]:
    return sorted(p.stem for p in (runs / "hosting" / kind).iterdir())


def test_each_deploying_run_updates_the_one_endpoint_and_removes_what_it_served_before(definition_file, tmp_path):
    first, console = execute(definition_file, tmp_path, "first")
    assert first["status"] == "SUCCEEDED", console[-3000:]
    assert "→ FindEndpoint: caught, going to CreateEndpoint" in console
    second, console = execute(definition_file, tmp_path, "second")
    assert second["status"] == "SUCCEEDED", console[-3000:]
    assert "▶ UpdateEndpoint" in console and "▶ DeleteOldModel" in console
    assert listing(tmp_path, "endpoints") == ["gpt-dev-endpoint"]  # one endpoint, whatever the number of runs
    endpoint = json.loads((tmp_path / "hosting/endpoints/gpt-dev-endpoint.json").read_text())
    assert endpoint["EndpointStatus"] == "InService" and endpoint["EndpointConfigName"].startswith("gpt-dev-second-")
    assert [c.split("-")[2] for c in listing(tmp_path, "endpoint-configs")] == ["second"]  # the first's removed
    assert [m.split("-")[2] for m in listing(tmp_path, "models")] == ["second"]


def test_a_model_that_fails_leaves_the_old_one_serving_and_the_execution_failed(definition_file, tmp_path):
    assert execute(definition_file, tmp_path, "first")[0]["status"] == "SUCCEEDED"
    result, console = execute(definition_file, tmp_path, "broken", model="fails")
    assert (result["status"], result["error"]) == ("FAILED", "Endpoint.UpdateRolledBack"), console[-3000:]
    assert "rolled the update of gpt-dev-endpoint back: it still serves gpt-dev-first-" in result["cause"]
    endpoint = json.loads((tmp_path / "hosting/endpoints/gpt-dev-endpoint.json").read_text())
    assert endpoint["EndpointConfigName"].startswith("gpt-dev-first-")  # nothing it serves was deleted
    assert [c.split("-")[2] for c in listing(tmp_path, "endpoint-configs")] == ["broken", "first"]
