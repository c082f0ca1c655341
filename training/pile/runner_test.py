import pytest

from pile.encode import Chunk, EncodeSettings, chunk_records
from pile.runner import PoolRunner, SerialRunner, make_runner


def chunks(documents, fail_after=None):
    records = (b'{"text": "%s"}' % d.encode("unicode_escape").replace(b'"', b'\\"') for d in documents)
    for number, chunk in enumerate(chunk_records(records, "in", "jsonl", chunk_bytes=2_000)):
        if number == fail_after:
            raise OSError("disk went away")
        yield chunk


@pytest.fixture
def settings(tokenizer_json, monkeypatch):
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")  # restored after SerialRunner turns it off
    return EncodeSettings(tokenizer_json, "uint16", validation_fraction=0.1)


def test_pool_gives_the_serial_results_in_order_and_stops_cleanly_on_a_read_error(corpus, settings):
    documents = [d[:400] for d in corpus[:120]]
    serial = SerialRunner(settings)
    expected = [(r.train.tolist(), r.validation.tolist()) for r in serial.map(chunks(documents))]
    assert len(expected) > 8
    pool = PoolRunner(settings, workers=2)
    try:
        got = [(r.train.tolist(), r.validation.tolist()) for r in pool.map(chunks(documents))]
        assert got == expected
        partial = []
        with pytest.raises(OSError, match="disk went away"):
            partial.extend(pool.map(chunks(documents, fail_after=7)))
        assert [(r.train.tolist(), r.validation.tolist()) for r in partial] == expected[:7]
    finally:
        pool.close()


def test_make_runner_picks_by_worker_count(settings):
    assert isinstance(make_runner(settings, 1), SerialRunner)
    runner = make_runner(settings, 2)
    assert isinstance(runner, PoolRunner)
    runner.close()


def test_serial_runner_encodes(settings):
    (result,) = SerialRunner(settings).map([Chunk("in", "txt", 0, [b"abc"])])
    assert result.documents_written == 1 and result.train[-1] == 0
