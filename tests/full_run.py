"""A run of the whole suite (``make test``: no paths given, pytest's ``testpaths``) skips nothing.

A skipped test there hides what it checks (e.g. the two-logical-CPU tests where TensorFlow started first), so
the run fails and names each one, unless the skip says the machine cannot run the test at all
(:data:`MACHINE_LIMITS`). Runs of chosen paths may still skip.
"""

from __future__ import annotations

import pytest

# Skip reasons that a full run accepts: what this machine lacks, not a check that did not hold.
MACHINE_LIMITS = (
    "has no Linux namespaces",  # local/jobs/namespaces.py's isolation(): macOS
    "not found (util-linux, iproute2)",
    "namespaces cannot be made here",  # a Linux that restricts unprivileged user namespaces
    "this system sets no CPU affinity",  # bench/rounds_test.py: macOS
)


def _skipped(config: pytest.Config) -> list[str]:
    if config.args_source is not pytest.Config.ArgsSource.TESTPATHS:
        return []
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    return [r.nodeid for r in skipped if not any(limit in str(r.longrepr) for limit in MACHINE_LIMITS)]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    if _skipped(session.config) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if skipped := _skipped(config):
        terminalreporter.write_line(f"A full run skips nothing; {len(skipped)} skipped:", red=True)
        for nodeid in skipped:
            terminalreporter.write_line(f"  {nodeid}", red=True)
