import json

import pyarrow.parquet as pq
import pytest
import zstandard

from cli.errors import CommandError
from local.corpus import DOCS_PIECE_CHARS, own_corpus, sample_mix_input, write_corpus, write_mix_corpus
from local.folder_store import FolderStore
from training.pile.sample_corpus import MALFORMED


def test_corpus_is_pile_format_with_both_sources_and_two_malformed_lines(tmp_path):
    paths = write_corpus(tmp_path, total_mb=2, files=3)
    assert [p.name for p in paths] == ["00.jsonl.zst", "01.jsonl.zst", "02.parquet"]
    lines = [
        line + b"\n"
        for p in paths[:2]
        for line in zstandard.ZstdDecompressor().stream_reader(p.open("rb")).read().splitlines()
    ]
    bad = [line for line in lines if line in MALFORMED]
    assert len(bad) == 2
    records = [json.loads(line) for line in lines if line not in MALFORMED]
    assert {r["meta"]["pile_set_name"] for r in records} == {"Pile-CC", "Github"}
    parquet = pq.read_table(paths[2])["text"].to_pylist()  # a FineWeb-like file: its text column
    assert parquet and sum(len(t.encode()) for t in [*(r["text"] for r in records), *parquet]) >= 2 << 20


def test_a_one_file_corpus_of_one_s_own_gets_one_preprocessing_instance_and_its_own_dataset(tmp_path):
    (tmp_path / "notes.txt").write_text("my own words\n" * 100)
    store = FolderStore(tmp_path / "s3")
    first = own_corpus(tmp_path / "notes.txt", store, "raw", most_instances=2)
    uri = first["corpus"]["s3_uri"]
    assert uri.startswith("s3://raw/own/own-notes-") and first["dataset"]["name"] == uri.split("/")[-2]
    assert first["preprocessing"] == {"instance_count": 1}
    assert store.list(uri) == [(uri + "notes.txt", 1300)]
    assert own_corpus(tmp_path / "notes.txt", store, "raw", 2) == first  # the same file: the same dataset
    (tmp_path / "notes.txt").write_text("changed\n")
    assert own_corpus(tmp_path / "notes.txt", store, "raw", 2)["dataset"] != first["dataset"]


def test_a_folder_corpus_keeps_its_layout_and_at_most_the_default_instances(tmp_path):
    folder = tmp_path / "my corpus"
    (folder / "part").mkdir(parents=True)
    for name in ("a.jsonl", "b.jsonl.gz", "part/c.txt"):
        (folder / name).write_bytes(b"x")
    corpus = own_corpus(folder, FolderStore(tmp_path / "s3"), "raw", most_instances=2)
    assert corpus["dataset"]["name"].startswith("own-my-corpus-") and corpus["preprocessing"]["instance_count"] == 2
    names = [u.rsplit("/own/", 1)[1].split("/", 1)[1] for u, _ in FolderStore(tmp_path / "s3").list("s3://raw/own/")]
    assert names == ["a.jsonl", "b.jsonl.gz", "part/c.txt"]
    (folder / "part" / "d.csv").write_bytes(b"x")
    with pytest.raises(CommandError, match=r"d.csv: not a corpus file"):
        own_corpus(folder, FolderStore(tmp_path / "s3"), "raw", 2)


def test_the_sample_mix_is_two_sources_one_of_them_parquet_each_with_its_own_files(tmp_path):
    written = write_mix_corpus(tmp_path, total_mb=2)
    assert {name: [p.relative_to(tmp_path).as_posix() for p in paths] for name, paths in written.items()} == {
        "pile": ["pile/00.jsonl.zst", "pile/01.jsonl.zst"],
        "web": ["web/00.parquet", "web/01.parquet"],
    }
    code = [
        line + b"\n"
        for p in written["pile"]
        for line in zstandard.ZstdDecompressor().stream_reader(p.open("rb")).read().splitlines()
    ]
    assert sum(line in MALFORMED for line in code) == 2
    assert {json.loads(line)["meta"]["pile_set_name"] for line in code if line not in MALFORMED} == {"Github"}
    docs = [text for p in written["web"] for text in pq.read_table(p)["text"].to_pylist()]
    assert len(docs) > 400 and max(len(text) for text in docs) == DOCS_PIECE_CHARS  # pieces: a validation split each
    sources = sample_mix_input("s3://raw/sample-mix/")["sources"]
    assert [(s["name"], s["s3_uri"]) for s in sources] == [
        ("pile", "s3://raw/sample-mix/pile/"),
        ("web", "s3://raw/sample-mix/web/"),
    ]
