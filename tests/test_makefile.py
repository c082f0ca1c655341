"""The Makefile: a bare `make` lists the targets; CONFIG= reaches cdk as -c config= (dry runs: `make -n`)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make(*args: str) -> str:
    return subprocess.run(["make", "-s", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


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
