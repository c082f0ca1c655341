"""Hosts as processes: stopped the way SageMaker stops instances."""

import signal
import sys
import textwrap
import time

from local.jobs.common import Host, run_hosts

# A host that notes SIGTERM in a file (its child, like train.py under the toolkit's `train`, does the same).
GRACEFUL = """
import pathlib, signal, subprocess, sys, time
folder = pathlib.Path(sys.argv[1])
def noted(name):
    def handler(signum, frame):
        (folder / name).write_text("SIGTERM")
        sys.exit(143)
    return handler
if len(sys.argv) > 2:  # the child
    signal.signal(signal.SIGTERM, noted("child"))
    (folder / "child-ready").touch()
    time.sleep(60)
signal.signal(signal.SIGTERM, noted("graceful"))
subprocess.Popen([sys.executable, __file__, str(folder), "child"])
while not (folder / "child-ready").exists():
    time.sleep(0.02)
(folder / "graceful-ready").touch()
time.sleep(60)
"""
STUBBORN = """
import pathlib, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
(pathlib.Path(sys.argv[1]) / "stubborn-ready").touch()
time.sleep(60)
"""
FAILING = """
import pathlib, sys, time
folder = pathlib.Path(sys.argv[1])
while not all((folder / f"{name}-ready").exists() for name in ("graceful", "stubborn")):
    time.sleep(0.02)
sys.exit(3)
"""


def test_a_failed_host_stops_the_others_with_sigterm_then_sigkill_after_the_grace(tmp_path):
    hosts = []
    for name, source in (("failing", FAILING), ("graceful", GRACEFUL), ("stubborn", STUBBORN)):
        script = tmp_path / f"{name}.py"
        script.write_text(textwrap.dedent(source))
        hosts.append(Host(name, [sys.executable, str(script), str(tmp_path)], {}, tmp_path))
    started = time.monotonic()
    codes = run_hosts(hosts, tmp_path / "logs", echo="none", grace_seconds=1.0)
    assert codes == {"failing": 3, "graceful": 143, "stubborn": -signal.SIGKILL}
    assert (tmp_path / "graceful").read_text() == (tmp_path / "child").read_text() == "SIGTERM"
    assert time.monotonic() - started < 20
