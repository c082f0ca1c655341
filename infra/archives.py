"""Unpacking a tar archive that may come from anyone (a model.tar.gz, a job's source bundle), on every Python.

``extract`` refuses what tarfile's ``data`` filter refuses (PEP 706) and more: a member with an absolute name,
one that lands outside the folder (``..``), a link of either kind, a device, FIFO or sparse file. It also refuses
an archive that explodes: more than ``MAX_MEMBERS`` members, or more than ``MAX_EXPANSION`` times its own size of
decompressed tar stream (headers and data; at least ``FLOOR_BYTES`` allowed). The stream is read through a bound
(``_Bounded``), so no header and no skipped member can make it decompress, hold or write past that: an 865-byte
bz2 file that unpacks to 1 GiB is refused after reading its first header. Every member is checked first, so a
refused archive writes nothing. Python 3.12 and 3.11.4+ then extract with ``filter="data"``; older 3.11 releases
(Debian 12 ships 3.11.2) have no ``filter`` argument, and get the same member rules from the checks here and the
same file modes and owners from ``_as_data`` below.
"""

from __future__ import annotations

import bz2
import copy
import gzip
import lzma
import os
import tarfile
import zlib
from pathlib import Path
from typing import BinaryIO

MAX_EXPANSION = 100  # decompressed bytes per archive byte: model weights barely compress, text and code 3-10 times
FLOOR_BYTES = 256 << 20  # what even a tiny archive may unpack to
MAX_MEMBERS = 100_000  # a model archive has some 50 (code/lib's tokenizers included), the source bundle some 200
# (magic bytes, opener) of the compressions tarfile reads; anything else is read as an uncompressed tar.
COMPRESSIONS = ((b"\x1f\x8b", gzip.GzipFile), (b"BZh", bz2.BZ2File), (b"\xfd7zXZ\x00", lzma.LZMAFile))
READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError)  # OSError: gzip's and bz2's own


class UnsafeArchive(ValueError):
    """A member that would leave the folder, link elsewhere or make a device: the archive is not extracted."""


def extract(archive: Path, dest: Path) -> None:
    """Unpacks ``archive`` (gzip, bz2, xz or none, whatever its name says) into ``dest``; raises UnsafeArchive naming
    the member, or the bound an exploding archive went past.

    Args:
        archive: the tar file.
        dest: the folder to unpack into (made if missing).
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    limit = max(FLOOR_BYTES, MAX_EXPANSION * Path(archive).stat().st_size)
    with open(archive, "rb") as raw:
        try:
            tar = tarfile.open(fileobj=_Bounded(_decompressed(raw), limit, archive), mode="r:")  # noqa: SIM115
            members = _checked_members(tar, archive, dest.resolve(), limit)
        except READ_ERRORS as error:
            raise UnsafeArchive(f"{archive}: not a readable tar archive ({error})") from None
        try:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4
                tar.extractall(dest, members=members, filter="data")
            else:
                tar.extractall(dest, members=[_as_data(m) for m in members])
        except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as error:
            raise UnsafeArchive(f"{archive}: not a readable tar archive ({error})") from None


def _decompressed(raw: BinaryIO) -> BinaryIO:
    """The tar stream of ``raw``, decompressed by its magic bytes (a bz2 file named .tar.gz is still bz2)."""
    head = raw.read(8)
    raw.seek(0)
    for magic, opener in COMPRESSIONS:
        if head.startswith(magic):
            return opener(fileobj=raw) if opener is gzip.GzipFile else opener(raw)
    return raw


def _checked_members(tar: tarfile.TarFile, archive: Path, root: Path, limit: int) -> list[tarfile.TarInfo]:
    """Every member, each checked as it is read: the first refused one raises before the next is decompressed."""
    members, declared = [], 0
    for member in tar:
        problem = _refusal(member, root)
        if problem:
            raise UnsafeArchive(f"{archive}: member {member.name!r} {problem}; nothing was extracted")
        declared += member.size
        if declared > limit:
            raise UnsafeArchive(_too_large(archive, limit))
        members.append(member)
        if len(members) > MAX_MEMBERS:
            raise UnsafeArchive(f"{archive}: more than {MAX_MEMBERS:,} members; nothing was extracted")
    return members


def _too_large(archive: Path, limit: int) -> str:
    return (
        f"{archive}: unpacks to more than {limit:,} bytes ({MAX_EXPANSION} times its size, at least "
        f"{FLOOR_BYTES >> 20} MiB): refused as an archive bomb; nothing was extracted"
    )


class _Bounded:
    """A read-only stream that raises UnsafeArchive rather than read or seek past ``limit`` bytes of ``stream``."""

    def __init__(self, stream: BinaryIO, limit: int, archive: Path):
        self.stream, self.limit, self.archive = stream, limit, archive

    def read(self, size: int = -1) -> bytes:
        room = self.limit - self.stream.tell()
        data = self.stream.read(room + 1 if size is None or size < 0 or size > room else size)
        if len(data) > room:
            raise UnsafeArchive(_too_large(self.archive, self.limit))
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        target = offset if whence == os.SEEK_SET else self.stream.tell() + offset
        if whence == os.SEEK_END or target > self.limit:  # tarfile seeks forward over members' data
            raise UnsafeArchive(_too_large(self.archive, self.limit))
        return self.stream.seek(target)

    def tell(self) -> int:
        return self.stream.tell()


def _refusal(member: tarfile.TarInfo, root: Path) -> str:
    """Why ``member`` may not be extracted under ``root`` ("" when it may)."""
    if member.issym() or member.islnk():
        return f"is a link (to {member.linkname!r})"
    if not (member.isfile() or member.isdir()):
        return "is a device, FIFO or other special file"
    if member.issparse():  # its data holes unpack to more than it declares
        return "is a sparse file"
    if member.name.startswith(("/", "\\")) or os.path.isabs(member.name):
        return "has an absolute path"
    target = (root / member.name).resolve()
    if target != root and not target.is_relative_to(root):
        return "would be written outside the folder"
    return ""


def _as_data(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """The member as the ``data`` filter leaves it: no setuid/setgid/sticky or group/other write bits, owner-
    readable and -writable, owned by whoever extracts it."""
    member = copy.copy(member)
    mode = member.mode & 0o755  # drops 0o7000 (setuid, setgid, sticky) and group/other write
    if member.isfile():
        mode |= 0o600
        if not mode & 0o100:  # the data filter keeps execute bits only where the owner has one
            mode &= ~0o111
    else:  # a folder: the filter leaves it as made (0o777 less the umask); at least, it stays writable
        mode |= 0o700
    member.mode = mode
    member.uid, member.gid = os.getuid(), os.getgid()
    member.uname = member.gname = ""
    return member
