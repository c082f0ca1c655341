"""The local run's console lines (run_state_machine.mjs): a caught failure is one ✗ line, never a ✓ after it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAUGHT = {
    "StartAt": "Plan",
    "States": {
        "Plan": {
            "Type": "Task",
            "Resource": "arn:aws:lambda:us-east-1:123456789012:function:plan",
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "NotifyFailure"}],
            "End": True,
        },
        "NotifyFailure": {"Type": "Pass", "End": True},
    },
}


def test_a_caught_failure_prints_a_cross_and_no_tick(tmp_path):
    (tmp_path / "definition.json").write_text(json.dumps(CAUGHT))
    (tmp_path / "input.json").write_text("{}")
    (tmp_path / "context.json").write_text("{}")
    failing = tmp_path / "python"  # stands in for `python -m local.tasks`: reads the task, writes no result
    failing.write_text("#!/bin/sh\ncat > /dev/null\nexit 1\n")
    failing.chmod(0o755)
    env = {**os.environ, "PYTHON": str(failing)}  # States.TaskFailed
    done = subprocess.run(
        [str(ROOT / "node_modules" / ".bin" / "node"), str(ROOT / "local" / "run_state_machine.mjs")]
        + [str(tmp_path / name) for name in ("definition.json", "input.json", "context.json")]
        + ["e", str(tmp_path / "result.json")],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    lines = [line.split("  ")[-1] if line[0] in "✓✗" else line for line in done.stdout.splitlines()]
    assert lines == ["▶ Plan", "Plan: States.TaskFailed", "→ Plan: caught, going to NotifyFailure", "NotifyFailure"]
    assert [line[0] for line in done.stdout.splitlines()] == ["▶", "✗", "→", "✓"]
