"""A hung test fails with its name, even a hang in C code.

pytest-timeout (``timeout`` in pyproject.toml, ``@pytest.mark.timeout`` on the long tests) fails a test that runs
past its limit with SIGALRM, and the run goes on. A hang inside C code that never comes back to Python (a blocked
TensorFlow op or collective) never takes that signal, so a tenth of the limit later this plugin prints every
thread's stack, the hung test's frames in the main thread's, and ends the run (pytest-timeout's thread method).
"""

from __future__ import annotations

import threading

import pytest
from pytest_timeout import timeout_timer

GRACE = 0.1  # of the test's limit: a test failed by SIGALRM has that long to tear down
_TIMER = pytest.StashKey[threading.Timer]()


def pytest_timeout_set_timer(item: pytest.Item, settings) -> None:
    if settings.method == "signal" and settings.timeout:
        timer = threading.Timer(settings.timeout * (1 + GRACE), timeout_timer, (item, settings))
        timer.daemon = True
        timer.start()
        item.stash[_TIMER] = timer
    # None: pytest-timeout's own hook still sets the SIGALRM


def pytest_timeout_cancel_timer(item: pytest.Item) -> None:
    if timer := item.stash.get(_TIMER, None):
        timer.cancel()
