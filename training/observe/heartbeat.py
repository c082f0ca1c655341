"""A background line every minute saying how long ago the last step ended.

A stuck job prints no [train] lines, and no lines look the same as no job: CloudWatch cannot tell them
apart. This thread keeps talking while the loop is stuck, so the stalled-job alarm compares a number
(``health:seconds_since_step``) with its threshold, and no job means missing data, which does not alarm.

    [heartbeat] step=120 seconds_since_step=61.0
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Heartbeat:
    """Call :meth:`stepped` after each step; :attr:`longest_gap_s` is the longest wait between two.

    Args:
        emit: writes one line (the chief's ``emit``; other workers pass None and print nothing).
        interval_s: seconds between heartbeat lines.
    """

    def __init__(self, emit: Callable[[str], None] | None, interval_s: float = 60.0):
        self._emit, self._interval = emit, interval_s
        self._last = time.monotonic()
        self.step = 0
        self.longest_gap_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> None:
        if self._emit:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def stepped(self, step: int) -> None:
        now = time.monotonic()
        self.longest_gap_s = max(self.longest_gap_s, now - self._last)
        self._last, self.step = now, step

    def pause(self) -> None:
        """Evaluation or a checkpoint follows: the next gap starts after it."""
        self._last = time.monotonic()

    def line(self) -> str:
        return f"[heartbeat] step={self.step} seconds_since_step={time.monotonic() - self._last:.1f}"

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._emit(self.line())
