import gzip
import json
import zlib

import pyarrow.parquet as pq
import pytest
import zstandard

from pile.sample_corpus import (
    MALFORMED,
    MIX_SOURCES,
    PILE_SET_NAMES,
    compress_flushed,
    stdlib_documents,
    write_mix_corpus,
    write_pile,
    write_sample_corpus,
)


def test_stdlib_documents_reach_the_size_and_respect_the_cap():
    documents = stdlib_documents(100_000, max_document_bytes=5_000)
    assert 100_000 <= sum(len(d.encode()) for d in documents) < 100_000 + 4 * 5_000
    assert all(0 < len(d) <= 5_000 and d.strip() for d in documents)
    assert len(set(documents)) == len(documents)


def test_write_pile_in_every_compression_reads_back(tmp_path):
    documents = ["first", "second\nline", "third é"]
    plain = write_pile(tmp_path / "x.jsonl", documents).read_bytes()
    assert gzip.decompress(write_pile(tmp_path / "x.jsonl.gz", documents).read_bytes()) == plain
    zst = write_pile(tmp_path / "x.jsonl.zst", documents).read_bytes()
    assert zstandard.ZstdDecompressor().decompress(zst) == plain
    bodies = [json.loads(line) for line in plain.splitlines()]
    assert [b["text"] for b in bodies] == documents
    assert [b["meta"]["pile_set_name"] for b in bodies] == list(PILE_SET_NAMES[:3])


def test_sample_corpus_is_zst_files_and_a_parquet_with_the_malformed_lines_in_the_middle(tmp_path):
    documents = [(f"text {i}", PILE_SET_NAMES[i % 2]) for i in range(10)]
    paths = write_sample_corpus(tmp_path / "corpus", documents, files=3)
    assert [p.name for p in paths] == ["00.jsonl.zst", "01.jsonl.zst", "02.parquet"]
    lines = [line for p in paths[:2] for line in zstandard.ZstdDecompressor().decompress(p.read_bytes()).splitlines(1)]
    assert lines[5:7] == list(MALFORMED)
    texts = [json.loads(line)["text"] for line in lines if line not in MALFORMED]
    assert texts + pq.read_table(paths[2])["text"].to_pylist() == [t for t, _ in documents]


def test_mix_corpus_is_a_folder_of_zst_files_and_one_of_parquet_files(tmp_path):
    documents = [(f"text {i}", PILE_SET_NAMES[i % 2]) for i in range(10)]
    paths = write_mix_corpus(tmp_path / "corpus", documents[0::2], [text for text, _ in documents[1::2]], files=2)
    assert tuple(paths) == MIX_SOURCES
    assert [p.relative_to(tmp_path / "corpus").as_posix() for p in paths["pile"] + paths["web"]] == [
        "pile/00.jsonl.zst", "pile/01.jsonl.zst", "web/00.parquet", "web/01.parquet"
    ]  # fmt: skip
    lines = [
        line for p in paths["pile"] for line in zstandard.ZstdDecompressor().decompress(p.read_bytes()).splitlines(1)
    ]
    assert lines[2:4] == list(MALFORMED)
    pile = [json.loads(line) for line in lines if line not in MALFORMED]
    assert [(b["text"], b["meta"]["pile_set_name"]) for b in pile] == documents[0::2]
    assert [t for p in paths["web"] for t in pq.read_table(p)["text"].to_pylist()] == [t for t, _ in documents[1::2]]


@pytest.mark.parametrize(
    ("suffix", "decompress"),  # streaming decompressors: a cut stream gives what it holds, no error
    [
        (".gz", lambda d: zlib.decompressobj(wbits=31).decompress(d)),
        (".zst", lambda d: zstandard.ZstdDecompressor().decompressobj().decompress(d)),
    ],
)
def test_flushed_streams_decompress_whole_and_name_each_lines_end(suffix, decompress):
    lines = [b"line %d\n" % i for i in range(50)]
    data, ends = compress_flushed(lines, suffix)
    assert decompress(data) == b"".join(lines)
    assert len(ends) == 50 and ends[-1] < len(data)
    for k, end in enumerate(ends):  # cut at a line's end: exactly the lines up to it
        assert decompress(data[:end]) == b"".join(lines[: k + 1]), k
