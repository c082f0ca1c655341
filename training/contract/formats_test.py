from contract.formats import FORMATS, SUFFIXES, file_format


def test_each_corpus_of_today_has_its_format():
    cases = {
        "train/00.jsonl.zst": ("jsonl", "zstd"),  # The Pile, pile-uncopyrighted, SlimPajama
        "global-shard_01_of_10/shard_00000000_processed.jsonl.zstd": ("jsonl", "zstd"),  # DCLM-baseline
        "v1_7/cc_en_head-0000.json.gz": ("jsonl", "gzip"),  # Dolma
        "x.JSON.ZST": ("jsonl", "zstd"),
        "data/CC-MAIN-2024-10/000_00000.parquet": ("parquet", ""),  # FineWeb
        "c.jsonl.gz": ("jsonl", "gzip"),
        "book.txt": ("txt", ""),
        "x.jsonl": ("jsonl", ""),
    }
    assert {name: (f.records, f.compression) for name in cases if (f := file_format(name))} == cases
    assert [file_format(n) for n in ("x.json", "x.zst", "notes.md", "x.parquet.crc")] == [None] * 4


def test_no_suffix_is_hidden_by_an_earlier_one():
    for position, fmt in enumerate(FORMATS):
        assert not any(fmt.suffix.endswith(earlier.suffix) for earlier in FORMATS[:position])
    assert len(set(SUFFIXES)) == len(SUFFIXES)
