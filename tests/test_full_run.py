"""The suite's own guards: a full run fails on a skipped test; a hung test fails with its name; the two-logical-CPU
tests fail, never skip, where TensorFlow started before training/conftest.py could split the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # pytest runs of up to 300 s each, a few seconds here
ROOT = Path(__file__).resolve().parent.parent


def pytest_in(cwd: Path, *args: str, path: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), path])), "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_a_full_run_fails_on_a_skipped_test_and_names_it(tmp_path: Path):
    (tmp_path / "test_some.py").write_text(
        "import pytest\n\n"
        "def test_ok():\n    pytest.skip('not here')\n\n"
        "def test_root():\n    pytest.skip('darwin has no Linux namespaces')\n"  # a machine limit
    )
    full = pytest_in(tmp_path, "-p", "tests.full_run", "-o", "testpaths=test_some.py")
    assert full.returncode == 1, full.stdout
    assert "A full run skips nothing; 1 skipped:\n  test_some.py::test_ok\n" in full.stdout
    chosen = pytest_in(tmp_path, "-p", "tests.full_run", "test_some.py")  # paths chosen: a skip is a skip
    assert chosen.returncode == 0, chosen.stdout


HANGS = """
import signal, time

def test_hangs_in_python():
    while True:
        time.sleep(0.01)

def test_hangs_in_c():  # last: it ends the run
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # as C code that never returns to Python
    time.sleep(3600)
"""


def test_a_hung_test_fails_with_its_name_within_the_suites_time_limit(tmp_path: Path):
    header = pytest_in(ROOT, "-v", "--co", "tests/test_full_run.py")
    assert "timeout: 600.0s\ntimeout method: signal" in header.stdout, header.stdout  # pyproject.toml's default
    (tmp_path / "test_hangs.py").write_text(HANGS)
    limits = ("-o", "timeout=2", "-o", "hang_guard_seconds=1")
    python, c = (pytest_in(tmp_path, "-p", "tests.hang_guard", *limits, f"test_hangs.py::{name}")
                 for name in ("test_hangs_in_python", "test_hangs_in_c"))  # fmt: skip
    assert python.returncode == 1 and c.returncode == 1, python.stdout + c.stdout
    assert "FAILED test_hangs.py::test_hangs_in_python - Failed: Timeout (>2.0s)" in python.stdout
    assert "+ Timeout +" in c.stdout and ", in test_hangs_in_c\n" in c.stdout  # the run ends; its stack names the test


def test_the_two_cpu_tests_fail_with_the_reason_where_tensorflow_started_first(tmp_path: Path):
    (tmp_path / "tensorflow_first.py").write_text("import tensorflow as tf\n\ntf.constant(0)  # devices initialised\n")
    test = "test_sync_probe_times_an_all_reduce_over_two_replicas_and_is_none_for_one"
    run = pytest_in(ROOT, "-p", "tensorflow_first", f"training/observe/step_timer_test.py::{test}", path=str(tmp_path))
    assert run.returncode == 1, run.stdout
    assert "1 error" in run.stdout, run.stdout
    assert "this test needs two logical CPUs: TensorFlow was initialised before training/conftest.py" in run.stdout
