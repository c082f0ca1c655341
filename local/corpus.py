"""The sample corpus ``make run`` writes on first use, from text every Python installation has (no download).

Two kinds of documents, each with the ``meta.pile_set_name`` The Pile would give it:
- ``Github``: the standard library's own source files;
- ``Pile-CC``: the prose of the Python documentation that ships with the interpreter (``pydoc_data``).
Written by the training package's fixture (``training/pile/sample_corpus.py``) as a few ``jsonl.zst`` files
of a few MB each, with two malformed lines; this module only chooses the texts and the size.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from training.pile.sample_corpus import write_sample_corpus


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
    return write_sample_corpus(folder, documents(total_mb << 20), files)
