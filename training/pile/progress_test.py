import logging

from pile.progress import Progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_logs_rates_at_most_every_interval(caplog):
    clock = Clock()
    progress = Progress("algo-1", every_seconds=10, clock=clock)
    with caplog.at_level(logging.INFO, logger="preprocess"):
        clock.now = 105
        progress.update(documents=10, bytes_read=5_000_000, tokens=1_000_000)
        assert caplog.messages == []
        clock.now = 110
        progress.update(documents=10, bytes_read=5_000_000, tokens=1_000_000)
    assert caplog.messages == ["algo-1: 20 documents (2/s), 10.0 MB (1.00 MB/s), 2,000,000 tokens (200,000/s), 10 s"]
    assert (progress.documents, progress.bytes, progress.tokens) == (20, 10_000_000, 2_000_000)


def test_a_job_that_encodes_nothing_names_no_tokens(caplog):
    clock = Clock()
    progress = Progress("tokenizer sample", every_seconds=10, clock=clock, tokens=False)
    clock.now = 104
    progress.update(documents=3, bytes_read=6_300_000)
    assert progress.line() == "tokenizer sample: 3 documents (1/s), 6.3 MB (1.57 MB/s), 4 s"
