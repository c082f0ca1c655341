"""Archives unpack alike with and without tarfile's ``filter=`` (Python 3.11.2 has none), and unsafe ones not at all."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from infra.archives import UnsafeArchive, extract
from tests.synth import ROOT


@pytest.fixture(params=["data filter", "python 3.11.2"])
def python(request, monkeypatch):
    """This Python, or one like Debian 12's 3.11.2: no tarfile.data_filter, and extractall without ``filter``."""
    if request.param == "python 3.11.2":
        original = tarfile.TarFile.extractall

        def extractall(self, path=".", members=None, *, numeric_owner=False, **kwargs):
            if kwargs:
                raise TypeError(f"TarFile.extractall() got an unexpected keyword argument {next(iter(kwargs))!r}")
            return original(self, path, members, numeric_owner=numeric_owner, filter="fully_trusted")

        monkeypatch.delattr(tarfile, "data_filter", raising=False)
        monkeypatch.setattr(tarfile.TarFile, "extractall", extractall)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no data filter; the other parameter covers it")
    return request.param


def archive_of(path: Path, *members: tuple[tarfile.TarInfo, bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, mode: int = 0o644, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, linkname
    info.uid, info.gid, info.uname, info.gname = 12345, 12345, "someone", "someone"
    return info


def test_a_model_archive_unpacks_with_its_folders_and_data_modes(python, tmp_path):
    archive = archive_of(
        tmp_path / "model.tar.gz",
        (member("1", tarfile.DIRTYPE, 0o755), b""),
        (member("1/saved_model.pb"), b"graph"),
        (member("./code/inference.py", mode=0o4777), b"hooks"),  # setuid, world-writable
        (member("code/run.sh", mode=0o744), b"#!/bin/sh"),
    )
    extract(archive, tmp_path / "out")
    out = tmp_path / "out"
    assert (out / "1/saved_model.pb").read_bytes() == b"graph"
    assert (out / "code/inference.py").read_bytes() == b"hooks"
    assert (out / "code/inference.py").stat().st_mode & 0o7777 == 0o755  # high bits and go-w dropped
    assert (out / "code/run.sh").stat().st_mode & 0o7777 == 0o744


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (member("/etc/cron.d/x"), "absolute path"),
        (member("../escaped"), "outside the folder"),
        (member("code/../../escaped"), "outside the folder"),
        (member("code/link", tarfile.SYMTYPE, linkname="/etc/passwd"), "is a link"),
        (member("code/inner", tarfile.SYMTYPE, linkname="ok.txt"), "is a link"),
        (member("code/hard", tarfile.LNKTYPE, linkname="ok.txt"), "is a link"),
        (member("dev/sda", tarfile.BLKTYPE), "device"),
        (member("dev/tty", tarfile.CHRTYPE), "device"),
        (member("fifo", tarfile.FIFOTYPE), "device, FIFO"),
    ],
    ids=lambda value: value.name if isinstance(value, tarfile.TarInfo) else None,
)
def test_an_unsafe_member_is_refused_and_nothing_is_written(python, tmp_path, bad, says):
    archive = archive_of(tmp_path / "bad.tar.gz", (member("ok.txt"), b"fine"), (bad, b"x"))
    with pytest.raises(UnsafeArchive, match=says) as refused:
        extract(archive, tmp_path / "out" / "deep")
    assert repr(bad.name) in str(refused.value) and "\n" not in str(refused.value)
    assert list((tmp_path / "out").rglob("*")) == [tmp_path / "out" / "deep"]
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "out" / "escaped").exists()


def test_a_file_that_is_not_a_tar_archive_is_one_unsafe_archive_error(tmp_path):
    (tmp_path / "model.tar.gz").write_text("not an archive")
    with pytest.raises(UnsafeArchive, match="not a readable tar archive"):
        extract(tmp_path / "model.tar.gz", tmp_path / "out")


def test_the_local_create_model_unpacks_a_model_archive_on_python_3_11_2(python, tmp_path):
    """The local run's last step failed here on 3.11.2 after 18 minutes of training (issue 36)."""
    from local.folder_store import FolderStore
    from local.hosting import create_model

    archive_of(tmp_path / "s3/bucket/model.tar.gz", (member("1/saved_model.pb"), b"graph"))
    request = {"ModelName": "m", "PrimaryContainer": {"ModelDataUrl": "s3://bucket/model.tar.gz"}}
    create_model(request, FolderStore(tmp_path / "s3"), tmp_path / "hosting")
    assert (tmp_path / "hosting/models/m/1/saved_model.pb").read_bytes() == b"graph"


def test_nothing_but_the_owner_unpacks_a_tar_archive():
    """extract is the one place an archive is unpacked: every other extractall or extract call is a finding."""
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("infra", "local", "cli", "tests", "training", "bench")
        for path in (ROOT / folder).rglob("*.py")
        if not path.name.endswith("_test.py") and path.name != "archives.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if ".extractall(" in line or "tar.extract(" in line
    ]
    assert found == []


def test_a_member_in_a_sibling_folder_whose_name_extends_the_destinations_is_outside_it(python, tmp_path):
    """``../deep-evil/x`` unpacked into ``out/deep`` lands in ``out/deep-evil``: inside by a string prefix, not by
    path components."""
    archive = archive_of(tmp_path / "bad.tar.gz", (member("ok.txt"), b"fine"), (member("../deep-evil/x"), b"x"))
    with pytest.raises(UnsafeArchive, match=r"member '\.\./deep-evil/x' would be written outside the folder"):
        extract(archive, tmp_path / "out" / "deep")
    assert list((tmp_path / "out").rglob("*")) == [tmp_path / "out" / "deep"]


class Zeros(io.RawIOBase):
    """``size`` zero bytes, read in pieces: a bomb's member made without holding it."""

    def __init__(self, size: int):
        self.left = size

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def bomb(path: Path, mode: str, *members: tarfile.TarInfo, pax: dict | None = None) -> Path:
    with tarfile.open(path, mode, format=tarfile.PAX_FORMAT, pax_headers=pax or {}) as tar:
        for info in members:
            tar.addfile(info, Zeros(info.size) if info.size else None)
    return path


def zeros_member(size: int, name: str = "1/variables/variables.data-00000-of-00001") -> tarfile.TarInfo:
    info = member(name)
    info.size = size
    return info


@pytest.mark.parametrize("mode", ["w:gz", "w:bz2", "w:xz"])
def test_an_archive_bomb_is_refused_before_anything_is_unpacked(python, tmp_path, monkeypatch, mode):
    """Issue 50, item 2: an 865-byte bz2 tar named .tar.gz unpacked to 1 GiB; here the same at 1/256 of the scale."""
    monkeypatch.setattr("infra.archives.FLOOR_BYTES", 1 << 20, raising=False)
    archive = bomb(tmp_path / "model.tar.gz", mode, member("ok.txt"), zeros_member(4 << 20))
    assert archive.stat().st_size * 100 < 4 << 20
    with pytest.raises(UnsafeArchive, match=r"unpacks to more than 1,048,576 bytes .* refused as an archive bomb"):
        extract(archive, tmp_path / "out")
    assert list((tmp_path / "out").rglob("*")) == []


def test_a_header_that_explodes_is_refused_before_it_is_held(python, tmp_path, monkeypatch):
    """A pax header is read whole into memory by tarfile: 4 MiB of it (a few KiB compressed) is past the bound."""
    monkeypatch.setattr("infra.archives.FLOOR_BYTES", 1 << 20, raising=False)
    archive = bomb(tmp_path / "model.tar.gz", "w:gz", member("ok.txt"), pax={"comment": "x" * (4 << 20)})
    with pytest.raises(UnsafeArchive, match="refused as an archive bomb"):
        extract(archive, tmp_path / "out")


def test_too_many_members_or_a_sparse_one_are_refused(python, tmp_path, monkeypatch):
    monkeypatch.setattr("infra.archives.MAX_MEMBERS", 10, raising=False)
    many = bomb(tmp_path / "many.tar.gz", "w:gz", *(member(f"f{i}") for i in range(11)))
    with pytest.raises(UnsafeArchive, match="more than 10 members; nothing was extracted"):
        extract(many, tmp_path / "out")
    bomb(tmp_path / "ten.tar.gz", "w:gz", *(member(f"f{i}") for i in range(10)))
    extract(tmp_path / "ten.tar.gz", tmp_path / "out")  # the bound itself is allowed
    sparse = bomb(tmp_path / "sparse.tar.gz", "w:gz", member("holes", tarfile.GNUTYPE_SPARSE))
    with pytest.raises(UnsafeArchive, match="'holes' is a sparse file"):
        extract(sparse, tmp_path / "out2")


def test_a_large_archive_that_does_not_expand_unpacks(python, tmp_path, monkeypatch):
    """Weights barely compress: an archive of 2 MiB of random bytes unpacks under a 1 MiB floor."""
    monkeypatch.setattr("infra.archives.FLOOR_BYTES", 1 << 20, raising=False)
    data = os.urandom(2 << 20)
    archive = archive_of(tmp_path / "model.tar.gz", (member("1/variables/variables.data"), data))
    extract(archive, tmp_path / "out")
    assert (tmp_path / "out/1/variables/variables.data").read_bytes() == data
