import os

import numpy as np
import pytest

from pile.bpe import encoder_from_json
from pile.encode import Chunk, Encoder, EncodeSettings, chunk_records, encode_in_worker, init_worker, is_validation


def test_chunks_keep_record_positions_and_size():
    records = [b"a" * 40, None, b"b" * 70, b"c" * 10, b"d"]
    chunks = list(chunk_records(records, "in", "jsonl", chunk_bytes=100))
    assert [(c.first_index, c.records) for c in chunks] == [(0, records[:3]), (3, records[3:])]
    assert all(c.input_name == "in" and c.kind == "jsonl" for c in chunks)


def test_a_read_error_hands_over_the_part_filled_chunk_first():
    def records():
        yield from (b"a" * 40, b"b" * 70, b"c" * 10, b"d")
        raise EOFError("cut")

    chunks = chunk_records(records(), "in", "jsonl", chunk_bytes=100)
    assert [c.records for c in (next(chunks), next(chunks))] == [[b"a" * 40, b"b" * 70], [b"c" * 10, b"d"]]
    with pytest.raises(EOFError, match="cut"):
        next(chunks)


def test_validation_choice_is_deterministic_and_near_the_fraction():
    picks = [is_validation("00", i, 0.1) for i in range(20_000)]
    assert picks == [is_validation("00", i, 0.1) for i in range(20_000)]
    assert 1_700 < sum(picks) < 2_300
    assert picks != [is_validation("01", i, 0.1) for i in range(20_000)]
    assert not any(is_validation("00", i, 0.0) for i in range(1_000))


def test_encode_appends_end_of_text_splits_documents_and_counts_skips(tokenizer_json):
    encoder = encoder_from_json(tokenizer_json)
    documents = [f"document number {i}\n" for i in range(200)]
    records = [b'{"text": "%s"}' % d.encode().replace(b"\n", b"\\n") for d in documents] + [b"{", b"", None]
    settings = EncodeSettings(tokenizer_json, "uint16", validation_fraction=0.2)
    result = Encoder(settings).encode(Chunk("in", "jsonl", 0, records))
    assert result.train.dtype == np.dtype("<u2") and result.validation.dtype == np.dtype("<u2")
    expected = {"train": [], "validation": []}
    for i, text in enumerate(documents):
        split = "validation" if is_validation("in", i, 0.2) else "train"
        expected[split] += [*encoder.encode(text, add_special_tokens=False).ids, 0]
    assert result.train.tolist() == expected["train"]
    assert result.validation.tolist() == expected["validation"]
    assert 0 < len(expected["validation"]) < len(expected["train"])
    assert (result.documents_read, result.documents_written) == (203, 200)
    assert result.skipped == {"not_json": 1, "blank_line": 1, "too_long": 1}
    assert result.bytes_read == sum(len(r) for r in records if r is not None)


def test_uint32_and_worker_entry_points(tokenizer_json, monkeypatch):
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")  # init_worker changes it; restored after the test
    monkeypatch.setenv("RAYON_NUM_THREADS", "0")
    init_worker(EncodeSettings(tokenizer_json, "uint32", validation_fraction=0.0))
    result = encode_in_worker(Chunk("in", "txt", 5, [b"plain text"]))
    assert result.train.dtype == np.dtype("<u4")
    assert result.train[-1] == 0 and len(result.validation) == 0
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"


def test_a_chunk_of_blank_lines_is_flushed_by_its_count():
    """Issue 50, item 2: 64 MiB of newlines were 67 million blank records in one chunk (blank records add no bytes)."""
    chunks = list(chunk_records(iter([b""] * 200_000), "in", "jsonl"))
    assert [len(c.records) for c in chunks] == [65_536, 65_536, 65_536, 3_392]
    assert [c.first_index for c in chunks] == [0, 65_536, 131_072, 196_608]
    assert [len(c.records) for c in chunk_records(iter([b"x"] * 25), "in", "jsonl", max_records=10)] == [10, 10, 5]
