"""Small Pile-format corpora made from text every Python install has (its standard library sources).

For tests, benchmarks and the local run (``local/corpus.py``), which may not download anything; a fixture,
so the training package leaves it out (``infra/source_bundle.py``) and no job imports it.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

PILE_SET_NAMES = ("Github", "Pile-CC", "ArXiv")
# What a real corpus has now and then, and preprocessing must count and skip: a line that is not JSON, an empty text.
MALFORMED = (b"{this line is not JSON\n", b'{"text": "", "meta": {"pile_set_name": "Github"}}\n')


def stdlib_documents(total_bytes: int, max_document_bytes: int = 20_000) -> list[str]:
    """Distinct pieces of standard-library sources, each at most ``max_document_bytes`` characters."""
    documents: list[str] = []
    seen: set[str] = set()
    size = 0
    for path in sorted(Path(os.__file__).parent.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for start in range(0, len(text), max_document_bytes):
            piece = text[start : start + max_document_bytes]
            if not piece.strip() or piece in seen:
                continue
            seen.add(piece)
            documents.append(piece)
            size += len(piece.encode())
            if size >= total_bytes:
                return documents
    return documents


def pile_line(text: str, pile_set_name: str) -> bytes:
    """One line of a Pile ``.jsonl`` file."""
    return json.dumps({"text": text, "meta": {"pile_set_name": pile_set_name}}).encode() + b"\n"


def pile_lines(documents: Iterable[tuple[str, str]]) -> list[bytes]:
    """The (text, pile_set_name) documents as Pile lines, the two MALFORMED ones in the middle."""
    lines = [pile_line(text, name) for text, name in documents]
    lines[len(lines) // 2 : len(lines) // 2] = MALFORMED
    return lines


def write_jsonl(path: str | Path, lines: Iterable[bytes]) -> Path:
    """Writes lines as ``.jsonl`` or any compressed JSON-lines format of ``contract/formats.py`` (by the file
    name: ``.jsonl.zstd``, ``.json.gz`` ...)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(lines)
    if path.name.endswith((".zst", ".zstd")):  # local/ imports this file without training/ on the path: no contract
        data = zstandard.ZstdCompressor().compress(data)
    elif path.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return path


def write_parquet(
    path: str | Path, documents: Iterable[str | None], row_group_rows: int = 64, text_field: str = "text"
) -> Path:
    """A FineWeb-like Parquet file: the documents in a ``text_field`` column beside an ``id`` column, in row
    groups of ``row_group_rows``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    texts = list(documents)
    table = pa.table({"id": [f"<urn:doc:{i}>" for i in range(len(texts))], text_field: pa.array(texts, pa.string())})
    pq.write_table(table, path, row_group_size=row_group_rows, compression="zstd")
    return path


def damage_row_group(path: str | Path, group: int, column: int = 1) -> None:
    """Overwrites the data of one column chunk of a Parquet file with 0xff bytes (its footer left whole)."""
    path = Path(path)
    chunk = pq.ParquetFile(path).metadata.row_group(group).column(column)
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset : chunk.data_page_offset + chunk.total_compressed_size] = b"\xff" * (
        chunk.total_compressed_size
    )
    path.write_bytes(bytes(data))


def write_pile(path: str | Path, documents: Iterable[str]) -> Path:
    """A Pile-format file, the documents' ``pile_set_name`` taken in turn from PILE_SET_NAMES."""
    lines = (pile_line(text, PILE_SET_NAMES[i % len(PILE_SET_NAMES)]) for i, text in enumerate(documents))
    return write_jsonl(path, lines)


def write_sample_corpus(folder: str | Path, documents: Iterable[tuple[str, str]], files: int = 4) -> list[Path]:
    """(text, pile_set_name) documents as ``files`` files, like The Pile's 30 ``.jsonl.zst`` but the last one a
    FineWeb-like ``.parquet`` (its text column only), with the two MALFORMED lines in the middle; returns the paths."""
    parts = _split(pile_lines(documents), files)
    paths = [write_jsonl(Path(folder) / f"{index:02d}.jsonl.zst", part) for index, part in enumerate(parts[:-1])]
    texts = [json.loads(line)["text"] for line in parts[-1]]  # past the middle: no malformed line
    return [*paths, write_parquet(Path(folder) / f"{files - 1:02d}.parquet", texts)]


MIX_SOURCES = ("pile", "web")  # the two sources of write_mix_corpus: Pile .jsonl.zst, FineWeb-like Parquet


def write_mix_corpus(
    folder: str | Path, pile: Iterable[tuple[str, str]], web: Iterable[str], files: int = 2
) -> dict[str, list[Path]]:
    """A corpus of two sources, a folder each: ``pile/NN.jsonl.zst``, the (text, pile_set_name) documents of ``pile``
    as Pile lines with the MALFORMED ones in the middle, and ``web/NN.parquet``, the texts of ``web`` in a ``text``
    column; ``files`` files a source. Returns each source's paths."""
    lines, texts = pile_lines(pile), list(web)
    pile_dir, web_dir = (Path(folder) / name for name in MIX_SOURCES)
    return {
        "pile": [write_jsonl(pile_dir / f"{n:02d}.jsonl.zst", part) for n, part in enumerate(_split(lines, files))],
        "web": [write_parquet(web_dir / f"{n:02d}.parquet", part) for n, part in enumerate(_split(texts, files))],
    }


def _split(items: list, parts: int) -> list[list]:
    """``items`` in ``parts`` consecutive runs of about equal length (the last ones shorter)."""
    size = -(-len(items) // parts)
    return [items[n * size : (n + 1) * size] for n in range(parts)]


def compress_flushed(lines: list[bytes], suffix: str) -> tuple[bytes, list[int]]:
    """``lines`` as one ``.gz`` or ``.zst`` stream, flushed after each line, and where each line's bytes end.

    A file cut between ``ends[k - 1]`` and ``ends[k]`` holds exactly ``lines[:k]`` complete (and part of line k).
    """
    if suffix == ".gz":
        gz = zlib.compressobj(wbits=31)  # 31: gzip header and trailer
        pieces = [gz.compress(line) + gz.flush(zlib.Z_SYNC_FLUSH) for line in lines] + [gz.flush()]
    else:
        zst = zstandard.ZstdCompressor().compressobj()
        pieces = [zst.compress(line) + zst.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) for line in lines]
        pieces.append(zst.flush())
    ends, size = [], 0
    for piece in pieces[:-1]:
        size += len(piece)
        ends.append(size)
    return b"".join(pieces), ends
