import pytest

from pile.inputs import InputError, Source, find_inputs, unsupported_files


def test_find_inputs_recursive_sorted_named_and_filtered(tmp_path):
    names = ("b.jsonl.zst", "a.txt", "sub/dir/c d.jsonl.gz", "notes.md", ".hidden.jsonl", ".cache/e.jsonl", "f.parquet")
    for name in (*names, "g.JSONL.ZSTD", "h.json.gz", "i.json.zst", "j.json", "k.zst"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    found = find_inputs(tmp_path)
    assert [(f.relative, f.name, f.kind) for f in found] == [
        ("a.txt", "a", "txt"),
        ("b.jsonl.zst", "b", "jsonl"),
        ("f.parquet", "f", "parquet"),
        ("g.JSONL.ZSTD", "g", "jsonl"),
        ("h.json.gz", "h", "jsonl"),
        ("i.json.zst", "i", "jsonl"),
        ("sub/dir/c d.jsonl.gz", "sub_dir_c_d", "jsonl"),
    ]
    assert found[0].path == tmp_path / "a.txt"
    assert [f.format.compression for f in found] == ["", "zstd", "", "zstd", "gzip", "zstd", "gzip"]
    assert unsupported_files(tmp_path) == ["j.json", "k.zst", "notes.md"]


def test_names_that_would_collide_are_refused(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(b"")
    (tmp_path / "a.txt").write_bytes(b"")
    with pytest.raises(InputError, match="both write shards named 'a'"):
        find_inputs(tmp_path)


def test_missing_or_empty_folder_is_an_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        find_inputs(tmp_path / "nope")
    (tmp_path / "readme.md").write_text("x")
    with pytest.raises(InputError, match=r"no input files .*\(not readable: readme.md\)"):
        find_inputs(tmp_path)


def test_sources_are_read_from_their_folders_named_apart_and_may_be_empty_on_a_host(tmp_path):
    for name in ("a/b-00.jsonl", "a-b/00.jsonl", "a-b/notes.md", "web/sub/x.parquet", "elsewhere.jsonl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "empty").mkdir()
    sources = [Source("web"), Source("a-b"), Source("empty"), Source("a")]
    found = find_inputs(tmp_path, sources)
    assert [(f.source, f.relative, f.name) for f in found] == [
        ("a", "a/b-00.jsonl", "a_b-00"),
        ("a-b", "a-b/00.jsonl", "a-b_00"),
        ("web", "web/sub/x.parquet", "web_sub_x"),
    ]
    assert found[2].path == tmp_path / "web" / "sub" / "x.parquet"
    assert unsupported_files(tmp_path, sources) == ["a-b/notes.md"]
    # a host that got no file of a source (ShardedByS3Key over more instances than its files) has no folder of it
    assert find_inputs(tmp_path, [Source("web"), Source("nope")]) == found[2:]
    with pytest.raises(InputError, match=r"no input files in .*empty"):
        find_inputs(tmp_path, [Source("empty")])
