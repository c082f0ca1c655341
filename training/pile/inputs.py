"""Finding the input files of a preprocessing run and naming them for output files."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

# Longest suffix first: the first match decides the kind.
SUFFIXES = {".jsonl.zst": "jsonl", ".jsonl.gz": "jsonl", ".jsonl": "jsonl", ".txt": "txt"}


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
    kind: str  # "jsonl" (one JSON document a line) or "txt" (plain text)


def input_kind(path: str | Path) -> tuple[str, str] | None:
    """``(kind, suffix)`` for a supported file name, else None."""
    lower = str(path).lower()
    for suffix, kind in SUFFIXES.items():
        if lower.endswith(suffix):
            return kind, suffix
    return None


def find_inputs(input_dir: str | Path) -> list[InputFile]:
    """Every supported file below ``input_dir`` (recursively, sorted by path); hidden files are ignored."""
    root = Path(input_dir)
    if not root.is_dir():
        raise InputError(f"input folder {root} does not exist")
    found: dict[str, InputFile] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root).as_posix()
        kind_suffix = input_kind(relative)
        if kind_suffix is None or any(part.startswith(".") for part in Path(relative).parts):
            continue
        kind, suffix = kind_suffix
        name = re.sub(r"[^A-Za-z0-9._-]", "_", relative[: -len(suffix)].replace("/", "_"))
        if name in found:
            raise InputError(f"inputs {found[name].relative} and {relative} would both write shards named {name!r}")
        found[name] = InputFile(path=path, relative=relative, name=name, kind=kind)
    if not found:
        raise InputError(f"no input files in {root}: expected {', '.join(SUFFIXES)} files")
    return list(found.values())
