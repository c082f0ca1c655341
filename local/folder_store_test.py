"""The local stand-in for S3 keeps every key inside its folder."""

from __future__ import annotations

import pytest

from local.folder_store import FolderStore


@pytest.mark.parametrize("uri", ["s3://checkpoints/../", "s3://../x", "s3://b/a/../../x", "s3://b/./x"])
def test_dot_segments_are_refused_not_followed_out_of_the_store(tmp_path, uri):
    store = FolderStore(tmp_path / "store")
    with pytest.raises(ValueError, match=r"'\.' and '\.\.' are not names in the local store"):
        store.put_text(uri, "x")
    assert not (tmp_path / "x").exists()


def test_keys_round_trip(tmp_path):
    store = FolderStore(tmp_path)
    store.put_text("s3://b/a/..x/y.txt", "text")
    assert store.list("s3://b/a/") == [("s3://b/a/..x/y.txt", 4)]
