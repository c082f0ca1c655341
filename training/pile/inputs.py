"""Finding the input files of a preprocessing run and naming them for output files."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

from contract.formats import DEFAULT_TEXT_FIELD, SUFFIXES, Format, file_format


class InputError(Exception):
    """A problem with the input folder as a whole (missing, empty, ambiguous names)."""


class NoDocumentsError(InputError):
    """Every record of the input was skipped: nothing to train on or to tokenize."""


@dataclasses.dataclass(frozen=True)
class Source:
    """One source of a mix, read from ``<input_dir>/<name>/``; ``name`` "" is a corpus of one source (all of
    ``input_dir``). ``pile_set_names``: the ``meta.pile_set_name`` values kept (none: all)."""

    name: str = ""
    weight: float = 1.0
    text_field: str = DEFAULT_TEXT_FIELD
    pile_set_names: frozenset[str] = frozenset()

    def folder(self, input_dir: str | Path) -> Path:
        return Path(input_dir) / self.name if self.name else Path(input_dir)


def corpus_sources(
    sources: Sequence[Source], text_field: str = DEFAULT_TEXT_FIELD, pile_set_names: frozenset[str] = frozenset()
) -> tuple[Source, ...]:
    """A mix's ``sources``, or without one the corpus as the one source "" (``text_field``, ``pile_set_names``)."""
    return tuple(sources) or (Source("", 1.0, text_field, pile_set_names),)


@dataclasses.dataclass(frozen=True)
class InputFile:
    """One input file: ``name`` is unique within a run and safe in a file name, e.g. ``00`` for ``00.jsonl.zst``
    (``web_00`` for ``web/00.jsonl.zst`` of source ``web``: source names hold no ``_``)."""

    path: Path
    relative: str  # path below the input folder, with "/" separators (a source's: below input_dir, "web/...")
    name: str
    format: Format
    source: str = ""

    @property
    def kind(self) -> str:
        """How its records are read: ``jsonl``, ``txt`` or ``parquet`` (``contract/formats.py``)."""
        return self.format.records


def _visible_files(root: Path) -> list[str]:
    """Relative paths of the files below ``root``, sorted, hidden files and folders left out."""
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    return [p for p in paths if not any(part.startswith(".") for part in p.split("/"))]


def unsupported_files(input_dir: str | Path, sources: Sequence[Source] = (Source(),)) -> list[str]:
    """The files below ``input_dir`` (a source's below ``<input_dir>/<name>/``) in a format preprocessing cannot
    read (named in the run's summary)."""
    found = []
    for source in sources:
        root = source.folder(input_dir)
        if root.is_dir():
            found += [_relative(source, p) for p in _visible_files(root) if file_format(p) is None]
    return found


def _relative(source: Source, path: str) -> str:
    return f"{source.name}/{path}" if source.name else path


def _source_inputs(input_dir: Path, source: Source) -> list[InputFile]:
    """The supported files of one source, sorted by path."""
    root = source.folder(input_dir)
    if source.name and not root.is_dir():  # a mix's source of which this host got no file (ShardedByS3Key)
        return []
    if not root.is_dir():
        raise InputError(f"input folder {root} does not exist")
    found: dict[str, InputFile] = {}
    for path in _visible_files(root):
        if (kind := file_format(path)) is None:
            continue
        relative = _relative(source, path)
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", path[: -len(kind.suffix)].replace("/", "_"))
        name = f"{source.name}_{stem}" if source.name else stem
        if name in found:
            raise InputError(f"inputs {found[name].relative} and {relative} would both write shards named {name!r}")
        found[name] = InputFile(path=root / path, relative=relative, name=name, format=kind, source=source.name)
    return list(found.values())


def find_inputs(input_dir: str | Path, sources: Sequence[Source] = (Source(),)) -> list[InputFile]:
    """Every supported file of every source (recursively, sorted by source, then path); hidden files are ignored.

    A source's folder may be empty or missing (a host may get no file of a small source); all of them may not.
    """
    root = Path(input_dir)
    found = [file for source in sorted(sources, key=lambda s: s.name) for file in _source_inputs(root, source)]
    if not found:
        unreadable = unsupported_files(root, sources)
        more = " ..." if len(unreadable) > 5 else ""
        named = f" (not readable: {', '.join(unreadable[:5])}{more})" if unreadable else ""
        folders = ", ".join(str(source.folder(root)) for source in sources)
        raise InputError(f"no input files in {folders}: expected {', '.join(SUFFIXES)} files{named}")
    return found
