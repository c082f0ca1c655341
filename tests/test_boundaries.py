"""The layout's import rules (README, "Architecture"), read from the source with ``ast``: a forbidden import fails.

training/             imports none of infra, local, cli (it ships to SageMaker as is); its rooms import one way:
                      contract/ nothing of the others, data/, gpt/ and observe/ only contract/, pile/ only
                      data/ and contract/, export/ only gpt/ and contract/, run/ any of them; none imports the
                      entry points
infra/                imports no TensorFlow or Keras (synthesis and the Plan step run without them)
the Plan function     imports no CDK: the files its bundle carries (infra/plan_step and the infra modules
                      it shares, ``bundled_files``) run in Lambda with the standard library only
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

from infra.workflow.plan_function import bundled_files
from tests.synth import ROOT

CDK = ("aws_cdk", "constructs", "cdk_nag", "jsii")
TRAINING = ROOT / "training"
ENTRY_POINTS = ("train", "preprocess")  # SageMaker runs them from the package's root, which is the import root
# Each room of training/ and the rooms its shipped modules may import (tests may reach further).
ROOMS = {
    "contract": (),
    "data": ("contract",),  # the mix's period and source names (contract/hparams.py), which the Plan step checks too
    "gpt": ("contract",),
    "observe": ("contract",),
    "pile": ("data", "contract"),  # the corpus formats (contract/formats.py), which the Plan step reads too
    "export": ("gpt", "contract"),
    "run": ("contract", "data", "gpt", "observe", "export", "pile"),  # pile: each token's bytes, for bits per byte
    "serving": (),
}


def shipped_modules(room: str) -> list[Path]:
    return sorted(p for p in (TRAINING / room).rglob("*.py") if not p.name.endswith("_test.py"))


RULES = {
    "training": (sorted(TRAINING.rglob("*.py")), ("infra", "local", "cli")),
    **{
        f"training/{room}": (shipped_modules(room), (*ENTRY_POINTS, *(r for r in ROOMS if r not in (room, *allowed))))
        for room, allowed in ROOMS.items()
    },
    "infra": (sorted((ROOT / "infra").rglob("*.py")), ("tensorflow", "keras", "tf_keras")),
    "plan function": ([ROOT / f for f in bundled_files()], CDK),
}


def imported_modules(source: str) -> Iterable[tuple[int, str]]:
    """(line, module) of every absolute import in ``source``, at any depth (lazy imports too)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def forbidden_imports(files: Iterable[Path], forbidden: tuple[str, ...]) -> list[str]:
    """``path:line imports module`` for each import of a ``forbidden`` package or one of its modules."""
    return [
        f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line} imports {module}"
        for path in files
        for line, module in imported_modules(path.read_text())
        if module.split(".")[0] in forbidden
    ]


@pytest.mark.parametrize("rule", RULES)
def test_no_forbidden_import(rule):
    files, forbidden = RULES[rule]
    assert files, f"{rule}: no files found"
    assert forbidden_imports(files, forbidden) == []


def test_the_plan_function_bundle_is_its_package_and_the_infra_modules_it_shares():
    bundled = {f.as_posix() for f in bundled_files()}
    assert "infra/plan_step/plan.py" in bundled and "infra/config/validation.py" in bundled
    assert not [f for f in bundled if f.endswith("_test.py") or f.endswith("conftest.py")]


def test_a_seeded_violation_is_found(tmp_path):
    seeded = tmp_path / "seeded.py"
    seeded.write_text("import json\nfrom aws_cdk import aws_s3\n\n\ndef f():\n    import infra.config as c\n")
    assert forbidden_imports([seeded], CDK) == [f"{seeded}:2 imports aws_cdk"]
    assert forbidden_imports([seeded], ("infra",)) == [f"{seeded}:6 imports infra.config"]
    assert forbidden_imports([seeded], ("tensorflow",)) == []


def test_the_training_package_is_its_entry_points_and_its_rooms():
    modules = {p.stem for p in TRAINING.glob("*.py") if not p.name.endswith("_test.py")}
    assert modules == {*ENTRY_POINTS, "conftest"}
    assert {p.relative_to(TRAINING).parts[0] for p in TRAINING.glob("*/**/*.py")} == set(ROOMS)
