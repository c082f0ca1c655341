"""What the platform check (tests/platforms.py, make platforms) decides without PyPI."""

from __future__ import annotations

import json

import pytest
from packaging.requirements import Requirement

from tests.platforms import INSTALLS, PLATFORMS, PYTHONS, ROOT, buildable, pip, read_requirements, selected

DEV = read_requirements(ROOT / "requirements-dev.txt")


@pytest.mark.parametrize("platform", PLATFORMS, ids=lambda p: p.name)
def test_every_platform_installs_one_tensorflow_of_the_one_pinned_version(platform):
    """Each platform's markers select exactly one TensorFlow distribution, all at one version (the training
    image's); the CPU-only build on Linux x86_64, the only platform PyPI has it for."""
    for python in PYTHONS:
        chosen = [r for r in selected(DEV, platform.environment(python)) if r.name in ("tensorflow", "tensorflow-cpu")]
        assert len(chosen) == 1, (platform.name, python, [str(r) for r in chosen])
        assert str(chosen[0].specifier) == "==2.21.0"
        assert (chosen[0].name == "tensorflow-cpu") == (platform.name == "Linux x86_64")


def test_source_only_pins_are_replaced_by_their_own_requirements():
    """sagemaker-training has no wheel: its requirements (gevent, and inotify_simple's none) are resolved
    instead, with the dependencies; without them (a --no-deps install) it is left out."""
    environment = PLATFORMS[2].environment("3.11")
    with_deps = {r.name: r for r in buildable(DEV, environment, deps=True)}
    assert "sagemaker-training" not in with_deps and "inotify_simple" not in with_deps
    assert {"gevent", "psutil", "paramiko"} <= set(with_deps)
    assert "tensorflow" in with_deps and "pytest" in with_deps
    assert "tox" not in with_deps  # its "test" extra's requirements are not the install's
    assert buildable([Requirement("sagemaker-training==5.1.4"), Requirement("pytest")], environment, False) == [
        Requirement("pytest")
    ]


def test_a_source_only_pin_other_than_the_installed_version_is_refused():
    with pytest.raises(SystemExit, match=r"sagemaker-training==0\.1: 5\.1\.4 is installed here; run make install"):
        buildable([Requirement("sagemaker-training==0.1")], PLATFORMS[0].environment("3.11"), deps=True)


def test_pip_evaluates_markers_in_the_platforms_environment_not_this_ones():
    """Offline (--no-index): a requirement marked for macOS only is ignored for Linux and sought for macOS,
    whichever platform this interpreter is on; pip's report names the platform's environment."""
    linux, mac = PLATFORMS[0].environment("3.11"), PLATFORMS[2].environment("3.11")
    marked = 'no-such-package-here==1; sys_platform == "darwin"'
    args = ("install", "--dry-run", "--ignore-installed", "--no-index", "--quiet", "--report", "-", marked)
    ignored = pip(linux, *args)
    assert ignored.returncode == 0, ignored.stderr
    assert json.loads(ignored.stdout)["environment"] == linux and json.loads(ignored.stdout)["install"] == []
    sought = pip(mac, *args)
    assert sought.returncode != 0 and "No matching distribution found for no-such-package-here==1" in sought.stderr


def test_every_install_file_exists_and_pins_each_requirement():
    for install in INSTALLS:
        for name in install.files:
            for requirement in read_requirements(ROOT / name):
                assert str(requirement.specifier).startswith("=="), f"{name}: {requirement} is not pinned"
