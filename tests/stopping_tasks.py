"""A Task handler whose job is one host that trains until stopped: on SIGTERM it "checkpoints" (a second) and
leaves, as train.py does. For the Ctrl-C test of the local run (tests/test_ctrl_c.py).

    LOCAL_TASKS=tests.stopping_tasks node local/run_state_machine.mjs ...
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from local import tasks
from local.jobs.common import Host, run_hosts

HOST = """
import pathlib, signal, sys, time
def stop(signum, frame):
    time.sleep(1)  # the step in flight, then its checkpoint
    pathlib.Path(sys.argv[1]).write_text("checkpointed")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("training", flush=True)
while True:
    time.sleep(0.1)
"""


def handle(context: tasks.RunContext, resource: str, parameters: Any) -> Any:
    folder = Path(context.execution_dir) / "job"
    folder.mkdir(parents=True, exist_ok=True)
    host = Host("algo-1", [sys.executable, "-c", HOST, str(folder / "checkpoint")], {}, folder)
    run_hosts([host], folder / "logs")
    return {"TrainingJobStatus": "Completed"}


if __name__ == "__main__":
    sys.exit(tasks.main(handle))
