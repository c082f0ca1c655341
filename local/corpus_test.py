import json

import zstandard

from local.corpus import write_corpus
from training.pile.sample_corpus import MALFORMED


def test_corpus_is_pile_format_with_both_sources_and_two_malformed_lines(tmp_path):
    paths = write_corpus(tmp_path, total_mb=2, files=3)
    assert [p.name for p in paths] == ["00.jsonl.zst", "01.jsonl.zst", "02.jsonl.zst"]
    lines = [
        line + b"\n"
        for p in paths
        for line in zstandard.ZstdDecompressor().stream_reader(p.open("rb")).read().splitlines()
    ]
    bad = [line for line in lines if line in MALFORMED]
    assert len(bad) == 2
    records = [json.loads(line) for line in lines if line not in MALFORMED]
    assert {r["meta"]["pile_set_name"] for r in records} == {"Pile-CC", "Github"}
    assert sum(len(r["text"].encode()) for r in records) >= 2 << 20
