"""A hung test fails with its name, even a hang in C code.

pytest-timeout (``timeout`` in pyproject.toml, ``@pytest.mark.timeout`` on the long tests) fails a test that runs
past its limit with SIGALRM, and the run goes on. A hang inside C code that never comes back to Python (a blocked
TensorFlow op or collective) never takes that signal, so ``hang_guard_seconds`` later this plugin prints every
thread's stack, the hung test's frames in the main thread's, and ends the run (pytest-timeout's thread method).
"""

from __future__ import annotations

import threading

import pytest
from pytest_timeout import timeout_timer

_TIMER = pytest.StashKey[threading.Timer]()


def pytest_addoption(parser: pytest.Parser) -> None:
    description = "seconds past a test's time limit before a hang SIGALRM did not end ends the run (default 60)"
    parser.addini("hang_guard_seconds", description, default="60")


def pytest_timeout_set_timer(item: pytest.Item, settings) -> None:
    if settings.method == "signal" and settings.timeout:
        # Time enough for a test failed by SIGALRM to report and tear down, on a loaded machine.
        grace = float(item.config.getini("hang_guard_seconds"))
        timer = threading.Timer(settings.timeout + grace, timeout_timer, (item, settings))
        timer.daemon = True
        timer.start()
        item.stash[_TIMER] = timer
    # None: pytest-timeout's own hook still sets the SIGALRM


def pytest_timeout_cancel_timer(item: pytest.Item) -> None:
    if timer := item.stash.get(_TIMER, None):
        timer.cancel()
