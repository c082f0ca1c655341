"""Every ``>>>`` example in a module's docstrings is a test of ``make test`` (the root conftest.py collects it), and
none is skipped."""

from __future__ import annotations

import tomllib
from pathlib import Path

from _pytest.doctest import DoctestModule

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["testpaths"]
MODULES = sorted(
    path
    for folder in FOLDERS
    for path in (ROOT / folder).rglob("*.py")
    if not path.name.endswith("_test.py") and not path.name.startswith("test_") and path.name != "conftest.py"
)
WITH_EXAMPLES = [path for path in MODULES if ">>>" in path.read_text(encoding="utf-8")]


def test_every_module_with_an_example_is_collected_for_it(request):
    assert len(WITH_EXAMPLES) >= 20  # 25 modules

    def collectors(path: Path) -> list:
        return request.config.hook.pytest_collect_file(file_path=path, parent=request.session)

    missed = [
        str(p.relative_to(ROOT)) for p in WITH_EXAMPLES if not any(isinstance(c, DoctestModule) for c in collectors(p))
    ]
    assert missed == []
    plain = next(path for path in MODULES if ">>>" not in path.read_text(encoding="utf-8"))
    assert not collectors(plain)  # not imported for nothing


def test_no_example_is_skipped():
    """A skipped example is text nothing checks (resource_names' was wrong twice over)."""
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in WITH_EXAMPLES
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "+SKIP" in line
    ]
    assert found == []
