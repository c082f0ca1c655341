"""Test-session settings that must be in place before jsii starts (the first import of aws_cdk), and the
docstring examples collected as tests."""

import os
from pathlib import Path

from _pytest.doctest import DoctestModule  # pytest's own collector of a module's examples (not exported)

_NODE22 = Path(__file__).parent / "node_modules" / ".bin" / "node"
if _NODE22.exists():
    os.environ.setdefault("JSII_NODE", str(_NODE22))  # the Node 22 that package.json pins
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

pytest_plugins = ["tests.full_run", "tests.hang_guard"]  # a full run fails on a skipped test; a hang fails


def pytest_collect_file(file_path: Path, parent):
    """Every ``>>>`` example in a module runs, as ``--doctest-modules`` runs it, but only modules that have one
    are imported for it (the option would import every file). An example that needs AWS or a trained model is
    written as a literal block (``Usage::``) instead. The training folder's examples find a tiny dataset as
    ``dataset_dir`` (training/conftest.py)."""
    if (
        file_path.suffix == ".py"
        and not parent.config.option.doctestmodules  # the option collects them itself
        and not file_path.name.endswith("_test.py")
        and not file_path.name.startswith("test_")
        and file_path.name != "conftest.py"
        and ">>>" in file_path.read_text(encoding="utf-8")
    ):
        return DoctestModule.from_parent(parent, path=file_path)
    return None
