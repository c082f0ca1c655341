import gzip

import pytest
import zstandard

from pile.inputs import InputFile
from pile.reader import ReadError, iter_blocks, iter_lines, iter_records, iter_text_documents
from pile.sample_corpus import compress_flushed

LINES = [b'{"text": "document %d"}' % i for i in range(3000)]
DATA = b"\n".join(LINES) + b"\n"


def source(path, kind="jsonl"):
    return InputFile(path=path, relative=path.name, name=path.name.split(".")[0], kind=kind)


@pytest.mark.parametrize(
    ("name", "encode"),
    [
        ("x.jsonl", lambda d: d),
        ("x.jsonl.gz", gzip.compress),
        ("x.jsonl.zst", zstandard.ZstdCompressor().compress),
        # Two frames back to back, as concatenated files are.
        ("y.jsonl.zst", lambda d: b"".join(zstandard.ZstdCompressor().compress(h) for h in (d[:777], d[777:]))),
        ("y.jsonl.gz", lambda d: gzip.compress(d[:777]) + gzip.compress(d[777:])),  # two members, as `cat` makes
    ],
)
def test_every_format_streams_back_its_lines(tmp_path, name, encode):
    (tmp_path / name).write_bytes(encode(DATA))
    assert b"".join(iter_blocks(tmp_path / name, block_bytes=1000)) == DATA
    assert list(iter_records(source(tmp_path / name))) == LINES


@pytest.mark.parametrize("name", ["x.jsonl.gz", "x.jsonl.zst"])
def test_truncated_compressed_file_yields_every_complete_line_then_names_the_error(tmp_path, name):
    data, ends = compress_flushed([line + b"\n" for line in LINES], "." + name.rsplit(".", 1)[1])
    cut = 2345
    (tmp_path / name).write_bytes(data[: ends[cut - 1] + 2])  # line 2345 starts, and is cut short
    got = []
    with pytest.raises(ReadError, match=rf"{name}: EOFError: .*(end-of-stream|truncated)"):
        got.extend(iter_records(source(tmp_path / name)))
    assert got == LINES[:cut]


def test_corrupt_zstd_is_a_read_error(tmp_path):
    (tmp_path / "x.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"garbage" * 10)
    with pytest.raises(ReadError, match="ZstdError"):
        list(iter_records(source(tmp_path / "x.jsonl.zst")))


def test_lines_across_blocks_last_line_without_newline_and_blank_lines():
    blocks = [b"ab", b"c\nd", b"\n\nlast"]
    assert list(iter_lines(blocks)) == [b"abc", b"d", b"", b"last"]


def test_too_long_lines_become_none_without_being_held():
    blocks = [b"short\n", b"x" * 6, b"y" * 6, b"\nok\n", b"z" * 20]
    assert list(iter_lines(blocks, max_record_bytes=10)) == [b"short", None, b"ok", None]


def test_text_documents_split_on_end_of_text_lines():
    lines = [b"first", b"", b"<|endoftext|>", b"second\r", b"<|endoftext|>\r", b"third"]
    assert list(iter_text_documents(lines)) == [b"first\n", b"second\r", b"third"]


def test_long_text_document_is_cut_at_a_line_boundary():
    lines = [b"aaaa", b"bbbb", b"cccc", None, b"d"]
    assert list(iter_text_documents(lines, max_record_bytes=10)) == [b"aaaa\nbbbb\n", b"cccc\n", None, b"d"]


def test_txt_file_records(tmp_path):
    (tmp_path / "book.txt").write_bytes(b"one\ntwo\n<|endoftext|>\nthree\n")
    assert list(iter_records(source(tmp_path / "book.txt", "txt"))) == [b"one\ntwo", b"three"]
