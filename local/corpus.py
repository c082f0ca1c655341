"""The sample corpus ``make run`` writes on first use, from text every Python installation has (no download), and
a corpus of the user's own (``make run CORPUS=path``).

Two kinds of documents, each with the ``meta.pile_set_name`` The Pile would give it:
- ``Github``: the standard library's own source files;
- ``Pile-CC``: the prose of the Python documentation that ships with the interpreter (``pydoc_data``).
``make run`` trains on them as a mix of two sources (``SAMPLE_MIX``): ``pile``, the sources as ``.jsonl.zst`` files
with two malformed lines, and ``web``, the documentation as FineWeb-like ``.parquet`` files (``write_mix_corpus``).
``write_corpus`` writes them as one Pile-like source. Written by the training package's fixture
(``training/pile/sample_corpus.py``); this module only chooses the texts and the size.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from cli.data import corpus_files
from local.folder_store import FolderStore
from training.pile.sample_corpus import write_mix_corpus as write_sample_mix
from training.pile.sample_corpus import write_sample_corpus

# The sample mix, (source, weight): the code (``pile``) is subsampled, the documentation (``web``, 0.5 MB) repeats.
SAMPLE_MIX = (("pile", 0.7), ("web", 0.3))
DOCS_PIECE_CHARS = 1_000  # the documentation cut in pieces: enough documents for each source's validation split


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


def write_mix_corpus(folder: Path, total_mb: int = 24, files: int = 2) -> dict[str, list[Path]]:
    """Writes ``SAMPLE_MIX``'s sources in ``folder/<source>/``, ``files`` files each, about ``total_mb`` MB of text
    in all: the standard library's sources as ``pile`` (``.jsonl.zst``, with two malformed lines), the documentation
    cut in pieces as ``web`` (Parquet). Returns each source's paths."""
    code, docs = [], []
    for text, name in documents(total_mb << 20):
        if name == "Pile-CC":
            docs += [text[i : i + DOCS_PIECE_CHARS] for i in range(0, len(text), DOCS_PIECE_CHARS)]
        else:
            code.append((text, name))
    return write_sample_mix(folder, code, docs, files)


def sample_mix_input(prefix: str) -> dict:
    """The execution input's ``corpus.sources`` for the sample mix written under ``prefix``."""
    return {"sources": [{"name": name, "s3_uri": f"{prefix}{name}/", "weight": weight} for name, weight in SAMPLE_MIX]}


def own_corpus(path: Path, store: FolderStore, raw_bucket: str, most_instances: int) -> dict:
    """A corpus of the user's own (``make run CORPUS=path``, a file or folder) in the local raw bucket, and the
    execution input that reads it.

    Its files, as ``cli upload`` takes them (``cli.data.corpus_files``: a CommandError for anything else), are
    copied to ``s3://<raw bucket>/own/<dataset>/``, where the dataset's name is the corpus's name and a digest of
    its files' names, sizes and times: the same files again reuse their dataset, changed ones make a new one.
    Preprocessing gets as many instances as there are files, at most ``most_instances`` (each reads whole files).

    Args:
        path: the corpus file or folder.
        store: the local object store.
        raw_bucket: the stack's raw bucket.
        most_instances: the default input's ``preprocessing.instance_count``.
    """
    files = corpus_files(path)
    base = path if path.is_dir() else path.parent
    relative = [f.relative_to(base).as_posix() for f in files]
    digest = hashlib.sha256()
    for name, file in zip(relative, files, strict=True):
        stat = file.stat()
        digest.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.resolve().name.split(".")[0]).strip("-_.")[:40] or "corpus"
    dataset = f"own-{slug}-{digest.hexdigest()[:10]}"
    uri = f"s3://{raw_bucket}/own/{dataset}/"
    for name, file in zip(relative, files, strict=True):
        target = store.path(uri + name)
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, target)
    return {
        "corpus": {"s3_uri": uri},
        "dataset": {"name": dataset},
        "preprocessing": {"instance_count": min(most_instances, len(files))},
    }
