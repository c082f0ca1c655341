"""Unpacking a tar archive that may come from anyone (a model.tar.gz, a job's source bundle), on every Python.

``extract`` refuses what tarfile's ``data`` filter refuses (PEP 706) and more: a member with an absolute name,
one that lands outside the folder (``..``), a link of either kind, a device or FIFO. It checks every member first,
so a refused archive writes nothing. Python 3.12 and 3.11.4+ then extract with ``filter="data"``; older 3.11
releases (Debian 12 ships 3.11.2) have no ``filter`` argument, and get the same member rules from the checks here
and the same file modes and owners from ``_as_data`` below.
"""

from __future__ import annotations

import copy
import os
import tarfile
from pathlib import Path


class UnsafeArchive(ValueError):
    """A member that would leave the folder, link elsewhere or make a device: the archive is not extracted."""


def extract(archive: Path, dest: Path) -> None:
    """Unpacks ``archive`` (any compression tarfile reads) into ``dest``; raises UnsafeArchive naming the member.

    Args:
        archive: the tar file.
        dest: the folder to unpack into (made if missing).
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            for member in members:
                problem = _refusal(member, dest.resolve())
                if problem:
                    raise UnsafeArchive(f"{archive}: member {member.name!r} {problem}; nothing was extracted")
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4
                tar.extractall(dest, members=members, filter="data")
            else:
                tar.extractall(dest, members=[_as_data(m) for m in members])
    except tarfile.TarError as error:
        raise UnsafeArchive(f"{archive}: not a readable tar archive ({error})") from None


def _refusal(member: tarfile.TarInfo, root: Path) -> str:
    """Why ``member`` may not be extracted under ``root`` ("" when it may)."""
    if member.issym() or member.islnk():
        return f"is a link (to {member.linkname!r})"
    if not (member.isfile() or member.isdir()):
        return "is a device, FIFO or other special file"
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
