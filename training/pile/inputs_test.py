import pytest

from pile.inputs import InputError, find_inputs, input_kind


def test_input_kind_by_suffix():
    assert input_kind("a/00.jsonl.zst") == ("jsonl", ".jsonl.zst")
    assert input_kind("x.JSONL.GZ") == ("jsonl", ".jsonl.gz")
    assert input_kind("x.jsonl") == ("jsonl", ".jsonl")
    assert input_kind("book.txt") == ("txt", ".txt")
    assert input_kind("x.json") is None
    assert input_kind("x.zst") is None


def test_find_inputs_recursive_sorted_named_and_filtered(tmp_path):
    for name in ("b.jsonl.zst", "a.txt", "sub/dir/c d.jsonl.gz", "notes.md", ".hidden.jsonl", ".cache/e.jsonl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    found = find_inputs(tmp_path)
    assert [(f.relative, f.name, f.kind) for f in found] == [
        ("a.txt", "a", "txt"),
        ("b.jsonl.zst", "b", "jsonl"),
        ("sub/dir/c d.jsonl.gz", "sub_dir_c_d", "jsonl"),
    ]
    assert found[0].path == tmp_path / "a.txt"


def test_names_that_would_collide_are_refused(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(b"")
    (tmp_path / "a.txt").write_bytes(b"")
    with pytest.raises(InputError, match="both write shards named 'a'"):
        find_inputs(tmp_path)


def test_missing_or_empty_folder_is_an_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        find_inputs(tmp_path / "nope")
    (tmp_path / "readme.md").write_text("x")
    with pytest.raises(InputError, match="no input files"):
        find_inputs(tmp_path)
