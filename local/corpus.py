"""A Pile-format sample corpus made from text every Python installation has, so ``make run`` downloads nothing.

Two kinds of documents, each with the ``meta.pile_set_name`` The Pile would give it:
- ``Github``: the standard library's own source files;
- ``Pile-CC``: the prose of the Python documentation that ships with the interpreter (``pydoc_data``).
Written as ``jsonl.zst`` files of a few MB each, like The Pile's 30 files (with two malformed lines, which
preprocessing must count and skip).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import zstandard

MALFORMED = [b"{this line is not JSON\n", b'{"text": "", "meta": {"pile_set_name": "Github"}}\n']


def documents(max_bytes: int) -> Iterator[tuple[str, str]]:
    """(text, pile_set_name) pairs, documentation first, then sources, until ``max_bytes`` of text."""
    from pydoc_data.topics import topics

    size = 0
    sources = sorted(Path(os.__file__).parent.rglob("*.py"))
    texts = [(text, "Pile-CC") for _, text in sorted(topics.items())]
    texts += ((path.read_text(encoding="utf-8", errors="replace"), "Github") for path in sources)
    for text, name in texts:
        if not text.strip():
            continue
        yield text, name
        size += len(text.encode())
        if size >= max_bytes:
            return


def write_corpus(folder: Path, total_mb: int = 24, files: int = 4) -> list[Path]:
    """Writes ``files`` zstd-compressed jsonl files holding about ``total_mb`` MB of text; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"text": t, "meta": {"pile_set_name": n}}).encode() + b"\n" for t, n in documents(total_mb << 20)
    ]
    lines[len(lines) // 2 : len(lines) // 2] = MALFORMED
    paths = []
    per_file = -(-len(lines) // files)
    for index in range(files):
        path = folder / f"{index:02d}.jsonl.zst"
        path.write_bytes(
            zstandard.ZstdCompressor(level=3).compress(b"".join(lines[index * per_file : (index + 1) * per_file]))
        )
        paths.append(path)
    return paths
