import gzip

import pyarrow.parquet as pq
import pytest
import zstandard
from contract.formats import Format, file_format

from pile.inputs import InputFile
from pile.reader import (
    ZSTD_BLOCK_BYTES,
    ReadError,
    _frame_header_bytes,
    iter_blocks,
    iter_lines,
    iter_parquet_texts,
    iter_records,
    iter_text_documents,
)
from pile.sample_corpus import compress_flushed, damage_row_group, write_parquet

LINES = [b'{"text": "document %d"}' % i for i in range(3000)]
DATA = b"\n".join(LINES) + b"\n"


def source(path, kind="jsonl"):
    found = file_format(path.name)
    fmt = found if found and found.records == kind else Format(path.suffix, kind, "")
    return InputFile(path=path, relative=path.name, name=path.name.split(".")[0], format=fmt)


@pytest.mark.parametrize(
    ("name", "encode"),
    [
        ("x.jsonl", lambda d: d),
        ("x.jsonl.gz", gzip.compress),
        ("x.jsonl.zst", zstandard.ZstdCompressor().compress),
        # Two frames back to back, as concatenated files are.
        ("y.jsonl.zst", lambda d: b"".join(zstandard.ZstdCompressor().compress(h) for h in (d[:777], d[777:]))),
        ("y.jsonl.gz", lambda d: gzip.compress(d[:777]) + gzip.compress(d[777:])),  # two members, as `cat` makes
        ("dclm.jsonl.zstd", zstandard.ZstdCompressor().compress),
        ("dolma.json.gz", gzip.compress),
        ("z.json.zst", zstandard.ZstdCompressor().compress),
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


@pytest.mark.parametrize("end", [b"\n", b""], ids=["ends-with-newline", "ends-without"])
def test_the_record_limit_holds_however_the_reads_split_a_line(end):
    """A line is over the limit by what is held of it plus its newest piece: every split of the same bytes into
    reads gives the same lines, none longer than the limit, the last one (no newline after it) included."""
    lines = [b"a" * 10, b"b" * 11, b"", b"c" * 3, b"d" * 25, b"e" * 9, b"f" * 11]
    data = b"\n".join(lines) + end
    expected = [line if len(line) <= 10 else None for line in lines]
    for size in range(1, len(data) + 1):
        blocks = [data[i : i + size] for i in range(0, len(data), size)]
        assert list(iter_lines(blocks, max_record_bytes=10)) == expected, f"reads of {size} bytes"


def test_text_documents_split_on_end_of_text_lines():
    lines = [b"first", b"", b"<|endoftext|>", b"second\r", b"<|endoftext|>\r", b"third"]
    assert list(iter_text_documents(lines)) == [b"first\n", b"second\r", b"third"]


def test_long_text_document_is_cut_at_a_line_boundary():
    lines = [b"aaaa", b"bbbb", b"cccc", None, b"d"]
    assert list(iter_text_documents(lines, max_record_bytes=10)) == [b"aaaa\nbbbb\n", b"cccc\n", None, b"d"]


def test_txt_file_records(tmp_path):
    (tmp_path / "book.txt").write_bytes(b"one\ntwo\n<|endoftext|>\nthree\n")
    assert list(iter_records(source(tmp_path / "book.txt", "txt"))) == [b"one\ntwo", b"three"]


TEXTS = [f"document {i} " + "é" * (i % 7) for i in range(300)]


def test_parquet_reads_the_text_column_row_group_by_row_group(tmp_path):
    path = write_parquet(tmp_path / "fw.parquet", [*TEXTS[:10], None, *TEXTS[10:]], row_group_rows=7)
    assert pq.ParquetFile(path).num_row_groups == 43
    assert list(iter_records(source(path, "parquet"))) == [t.encode() for t in TEXTS[:10]] + [b""] + [
        t.encode() for t in TEXTS[10:]
    ]
    assert list(iter_parquet_texts(path, max_record_bytes=12))[:3] == [b"document 0 ", None, None]  # é is 2 bytes


def test_parquet_text_field_and_a_missing_column(tmp_path):
    path = write_parquet(tmp_path / "c.parquet", TEXTS[:5], text_field="content")
    assert list(iter_records(source(path, "parquet"), text_field="content")) == [t.encode() for t in TEXTS[:5]]
    with pytest.raises(ReadError, match=r"c.parquet: OSError: no column 'text' \(columns: id, content\)"):
        list(iter_records(source(path, "parquet")))


def test_corrupt_parquet_keeps_the_row_groups_before_the_damage(tmp_path):
    path = write_parquet(tmp_path / "fw.parquet", TEXTS, row_group_rows=50)
    damage_row_group(path, 3)  # the text column of the fourth group
    got = []
    with pytest.raises(ReadError, match=r"fw\.parquet: "):
        got.extend(iter_records(source(path, "parquet")))
    assert got == [t.encode() for t in TEXTS[:150]]


def test_truncated_parquet_is_a_read_error(tmp_path):
    path = write_parquet(tmp_path / "cut.parquet", TEXTS)
    path.write_bytes(path.read_bytes()[:-100])  # the footer is gone: no row group can be found
    with pytest.raises(ReadError, match=r"cut.parquet: Arrow\w+: "):
        list(iter_records(source(path, "parquet")))


@pytest.mark.parametrize(
    ("name", "compress"), [("z.jsonl.zst", zstandard.ZstdCompressor().compress), ("z.jsonl.gz", gzip.compress)]
)
def test_a_file_of_zeros_comes_back_in_bounded_blocks(tmp_path, name, compress):
    """Issue 50, item 2: 16 KB of .zst holding 512 MiB of zeros came back as one 512 MiB block; here 4 MiB."""
    (tmp_path / name).write_bytes(compress(bytes(4 << 20)))
    sizes = [len(block) for block in iter_blocks(tmp_path / name, block_bytes=1 << 20)]
    assert sum(sizes) == 4 << 20
    assert max(sizes) <= (1 << 20) + ZSTD_BLOCK_BYTES, f"a block of {max(sizes):,} bytes"


def test_a_compression_bomb_stops_past_its_ratio_keeping_the_documents_before(tmp_path, monkeypatch):
    """Good lines, then 4 MiB of newlines (a few KB compressed): past 1,000 times what was read it is refused as a
    truncated file is, the lines before kept."""
    monkeypatch.setattr("pile.reader.EXPANSION_FLOOR_BYTES", 1 << 20, raising=False)
    data = b"".join(zstandard.ZstdCompressor().compress(part) for part in (DATA, b"\n" * (4 << 20), LINES[0]))
    (tmp_path / "bomb.jsonl.zst").write_bytes(data)
    got = []
    with pytest.raises(ReadError, match=r"bomb.jsonl.zst: ExpansionError: .* over 1,000 times, a compression bomb"):
        got.extend(record for record in iter_records(source(tmp_path / "bomb.jsonl.zst")) if record)
    assert got == LINES


def test_skippable_and_checksummed_zstd_frames_and_a_corrupt_block_header(tmp_path):
    skippable = (0x184D2A53).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"12345"
    checked = zstandard.ZstdCompressor(write_checksum=True, write_content_size=False).compress(DATA[:5000])
    (tmp_path / "s.jsonl.zst").write_bytes(
        skippable + checked + skippable + zstandard.ZstdCompressor().compress(DATA[5000:])
    )
    assert b"".join(iter_blocks(tmp_path / "s.jsonl.zst")) == DATA
    frame = bytearray(zstandard.ZstdCompressor().compress(DATA))
    frame[4 + 1 + _frame_header_bytes(frame[4])] |= 0b110  # the first block's type: 3, reserved
    (tmp_path / "bad.jsonl.zst").write_bytes(bytes(frame))
    with pytest.raises(ReadError, match="ZstdError: "):
        list(iter_records(source(tmp_path / "bad.jsonl.zst")))
