"""Test-session settings that must be in place before jsii starts (the first import of aws_cdk)."""

import os
from pathlib import Path

_NODE22 = Path(__file__).parent / "node_modules" / ".bin" / "node"
if _NODE22.exists():
    os.environ.setdefault("JSII_NODE", str(_NODE22))  # the Node 22 that package.json pins
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

pytest_plugins = ["tests.full_run", "tests.hang_guard"]  # a full run fails on a skipped test; a hang fails
