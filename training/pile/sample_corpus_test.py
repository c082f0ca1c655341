import gzip
import json

import zstandard

from pile.sample_corpus import PILE_SET_NAMES, stdlib_documents, write_pile


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
