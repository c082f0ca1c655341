"""Periodic progress lines (documents, MB, tokens and their rates), the same on a terminal and in a job log."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("preprocess")


class Progress:
    """Counts what was processed and logs a line at most every ``every_seconds``; ``tokens=False`` for a job that
    reads text without encoding it (the tokenizer's sample), whose line then names no tokens."""

    def __init__(
        self, label: str, every_seconds: float = 30.0, clock: Callable[[], float] = time.monotonic, tokens: bool = True
    ):
        self.label = label
        self.counts_tokens = tokens
        self.every_seconds = every_seconds
        self.clock = clock
        self.started = self._last = clock()
        self.documents = self.bytes = self.tokens = 0

    def update(self, documents: int = 0, bytes_read: int = 0, tokens: int = 0) -> None:
        self.documents += documents
        self.bytes += bytes_read
        self.tokens += tokens
        if self.clock() - self._last >= self.every_seconds:
            self.report()

    def line(self) -> str:
        seconds = max(self.clock() - self.started, 1e-9)
        tokens = f"{self.tokens:,} tokens ({self.tokens / seconds:,.0f}/s), " if self.counts_tokens else ""
        return (
            f"{self.label}: {self.documents:,} documents ({self.documents / seconds:,.0f}/s), "
            f"{self.bytes / 1e6:,.1f} MB ({self.bytes / 1e6 / seconds:,.2f} MB/s), {tokens}{seconds:,.0f} s"
        )

    def report(self) -> None:
        self._last = self.clock()
        log.info(self.line())
