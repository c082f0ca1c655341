"""The Makefile: a bare `make` lists the targets; CONFIG= reaches cdk as -c config= (dry runs: `make -n`)."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# Under `make test` the outer make's MAKELEVEL and MAKEFLAGS reach these makes, which then print "make[1]: Entering
# directory" lines; without them each make runs as a user's shell starts it.
SHELL_ENV = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}


def make(*args: str) -> str:
    argv = ["make", "-s", *args]
    return subprocess.run(argv, cwd=ROOT, env=SHELL_ENV, capture_output=True, text=True, check=True).stdout


def test_a_bare_make_is_help_and_lists_every_documented_target():
    documented = re.findall(r"^([a-z-]+):.*## ", (ROOT / "Makefile").read_text(), re.MULTILINE)
    listed = make()
    assert listed == make("help")
    assert [line.split()[1] for line in listed.splitlines() if line.startswith("  make ")] == documented
    assert {"run", "test", "synth", "deploy", "estimate"} <= set(documented)


def test_config_passes_an_overrides_file_to_synth_diff_deploy_and_the_estimate():
    for target in ("synth", "diff", "deploy"):
        commands = make("-n", target, "STAGE=prod", "CONFIG=my-overrides.json").splitlines()
        cdk = next(line for line in commands if line.startswith("node_modules/.bin/cdk"))
        assert cdk.endswith(f"-c stage=prod -c config={ROOT / 'my-overrides.json'}")
    assert "-c config" not in make("-n", "synth")
    estimate = make("-n", "estimate", "CONFIG=o.json").splitlines()[-1].strip()
    assert estimate.endswith(f"-m infra.estimate --stage dev --config {ROOT / 'o.json'}")


def test_destroy_first_removes_what_the_workflow_left_then_runs_cdk():
    commands = [line.strip() for line in make("-n", "destroy", "STAGE=prod").splitlines()]
    teardown = next(i for i, c in enumerate(commands) if "-m cli teardown --stage prod" in c)
    cdk = next(i for i, c in enumerate(commands) if c.startswith("node_modules/.bin/cdk destroy"))
    assert teardown < cdk and not commands[teardown].endswith("--stop")  # running work is refused, not stopped
    stopping = make("-n", "destroy", "STAGE=prod", "STOP=1")
    assert "-m cli teardown --stage prod --stop" in stopping


def dry_install(venv: Path, *args: str) -> subprocess.CompletedProcess:
    """``make -n`` of the .venv's install, for a .venv at ``venv`` (nothing is run)."""
    argv = ["make", "-n", f"VENV={venv}", f"{venv}/.installed", *args]
    return subprocess.run(argv, cwd=ROOT, env=SHELL_ENV, capture_output=True, text=True)


def built_venv(tmp_path: Path, built_with: str) -> Path:
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".built-with").write_text(built_with + "\n")
    (venv / ".installed").touch()  # newer than every requirements file
    return venv


def test_install_refuses_a_python_outside_the_readme_s_range_in_one_line(tmp_path):
    assert 'requires-python = ">=3.11,<3.14"' in (ROOT / "pyproject.toml").read_text()  # the README's 3.11 to 3.13
    refused = dry_install(tmp_path / "venv", f"PYTHON={sys.executable}", "PYTHON_RANGE=3.99 3.100")
    assert refused.returncode != 0 and refused.stdout == ""
    (line,) = refused.stderr.strip().splitlines()
    assert f"is Python {platform.python_version()}; this project runs on Python >= 3.99, < 3.100" in line
    missing = dry_install(tmp_path / "venv", "PYTHON=/nonexistent/python3")
    assert "PYTHON=/nonexistent/python3 does not run" in missing.stderr and len(missing.stderr.splitlines()) == 1
    assert dry_install(tmp_path / "venv", f"PYTHON={sys.executable}").returncode == 0


def test_naming_another_python_rebuilds_the_venv_and_the_default_keeps_it(tmp_path):
    here = os.path.realpath(sys.executable)
    venv = built_venv(tmp_path, "/some/other/python3.12")
    rebuilt = dry_install(venv, f"PYTHON={sys.executable}").stdout
    assert f"rebuilding {venv} with {here} (built with /some/other/python3.12)" in rebuilt
    assert f"rm -rf {venv}" in rebuilt and f"echo {here} > {venv}/.built-with" in rebuilt
    assert "rebuilding" not in dry_install(venv).stdout  # no PYTHON= named: the .venv is what it is
    (venv / ".built-with").write_text(here + "\n")
    assert "is up to date" in dry_install(venv, f"PYTHON={sys.executable}").stdout  # the same Python: kept


def test_npm_installs_quietly_its_warnings_and_notices_are_not_the_console():
    """Without .npmrc, `npm ci` printed 11 lines of EBADENGINE and install-scripts warnings (npm 11.19, Node 20)."""
    settings = dict(
        line.split("=", 1) for line in (ROOT / ".npmrc").read_text().splitlines() if line and not line.startswith("#")
    )
    assert settings == {"loglevel": "error", "update-notifier": "false", "fund": "false", "audit": "false"}
    install = make("-n", "-B", "node_modules/.installed").splitlines()
    assert [line.split("#")[0].strip() for line in install if line.startswith("npm")] == ["npm ci"]


def test_help_lists_every_variable_a_recipe_reads():
    """Each $(if $(NAME),...) a target reads, and PYTHON and STAGE, has its line under "variables"."""
    text = (ROOT / "Makefile").read_text()
    read = set(re.findall(r"\$\(if \$\(([A-Z]+)\)", text)) | {"PYTHON", "STAGE", "ARGS"}
    variables = make("help").split("  variables:\n", 1)[1].split("  then:", 1)[0]
    listed = {line.split("=")[0].strip() for line in variables.splitlines()}
    assert {"INPUT", "VERBOSE", "FAULTS", "PYTHON", "CORPUS", "CONFIG", "ARCHIVE"} <= read
    assert read <= listed, read - listed
