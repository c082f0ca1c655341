"""A Ctrl-C stops the local run as a stop does on AWS: SIGTERM to the hosts (which checkpoint), nothing left after."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from local.run import NODE, ROOT, resume_line
from local.tasks import RunContext
from tests.test_local_run import descendants

DEFINITION = {
    "StartAt": "Train",
    "States": {"Train": {"Type": "Task", "Resource": "arn:aws:states:::sagemaker:createTrainingJob.sync", "End": True}},
}


def test_ctrl_c_stops_the_job_s_hosts_as_aws_does_and_leaves_no_process(tmp_path):
    context = RunContext(str(tmp_path), "stack", str(tmp_path / "s3"), str(tmp_path / "efs"), str(tmp_path / "exec"))
    for name, content in (("definition", DEFINITION), ("input", {}), ("context", dataclasses.asdict(context))):
        (tmp_path / f"{name}.json").write_text(json.dumps(content))
    argv = [str(NODE), str(ROOT / "local" / "run_state_machine.mjs")]
    argv += [str(tmp_path / f"{n}.json") for n in ("definition", "input", "context")] + ["x", str(tmp_path / "r.json")]
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT), "LOCAL_TASKS": "tests.stopping_tasks"}
    # A terminal's Ctrl-C is SIGINT to its foreground process group: here, the interpreter's session.
    run = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)  # fmt: skip
    before = [run.stdout.readline() for _ in range(2)]  # "▶ Train", then the host's first line
    assert before[-1].strip() == "[algo-1] training", before
    processes = descendants(run.pid)
    assert len(processes) >= 2, "the task process and its host"
    os.killpg(run.pid, signal.SIGINT)
    interrupted = time.monotonic()
    output, _ = run.communicate(timeout=30)  # pytest-timeout, where installed, names a hang; this bounds it too
    assert time.monotonic() - interrupted < 10, output
    assert (tmp_path / "exec" / "job" / "checkpoint").read_text() == "checkpointed"  # SIGTERM reached the host
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "ABORTED" and run.returncode == 130
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    left = [pid for pid in processes if Path(f"/proc/{pid}").exists() or _alive(pid)]
    assert left == [], f"still running: {left}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_resume_line_names_the_input_that_resumes_the_run():
    line = resume_line(61.4, ROOT / "runs" / "executions" / "local-1" / "resume.json")
    assert line.startswith("Interrupted after 61 s. Resume it with: make run INPUT=runs/executions/local-1/resume.json")
    assert "\n" not in line
