"""Finding the input files of a preprocessing run and naming them for output files."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from contract.formats import SUFFIXES, Format, file_format


class InputError(Exception):
    """A problem with the input folder as a whole (missing, empty, ambiguous names)."""


class NoDocumentsError(InputError):
    """Every record of the input was skipped: nothing to train on or to tokenize."""


@dataclasses.dataclass(frozen=True)
class InputFile:
    """One input file: ``name`` is unique within a run and safe in a file name, e.g. ``00`` for ``00.jsonl.zst``."""

    path: Path
    relative: str  # path below the input folder, with "/" separators
    name: str
    format: Format

    @property
    def kind(self) -> str:
        """How its records are read: ``jsonl``, ``txt`` or ``parquet`` (``contract/formats.py``)."""
        return self.format.records


def _visible_files(root: Path) -> list[str]:
    """Relative paths of the files below ``root``, sorted, hidden files and folders left out."""
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    return [p for p in paths if not any(part.startswith(".") for part in p.split("/"))]


def unsupported_files(input_dir: str | Path) -> list[str]:
    """The files below ``input_dir`` in a format preprocessing cannot read (named in the run's summary)."""
    root = Path(input_dir)
    return [p for p in _visible_files(root) if file_format(p) is None] if root.is_dir() else []


def find_inputs(input_dir: str | Path) -> list[InputFile]:
    """Every supported file below ``input_dir`` (recursively, sorted by path); hidden files are ignored."""
    root = Path(input_dir)
    if not root.is_dir():
        raise InputError(f"input folder {root} does not exist")
    found: dict[str, InputFile] = {}
    for relative in _visible_files(root):
        if (kind := file_format(relative)) is None:
            continue
        name = re.sub(r"[^A-Za-z0-9._-]", "_", relative[: -len(kind.suffix)].replace("/", "_"))
        if name in found:
            raise InputError(f"inputs {found[name].relative} and {relative} would both write shards named {name!r}")
        found[name] = InputFile(path=root / relative, relative=relative, name=name, format=kind)
    if not found:
        unreadable = unsupported_files(root)
        more = " ..." if len(unreadable) > 5 else ""
        named = f" (not readable: {', '.join(unreadable[:5])}{more})" if unreadable else ""
        raise InputError(f"no input files in {root}: expected {', '.join(SUFFIXES)} files{named}")
    return list(found.values())
