"""Streaming reads of input files: decompressed blocks, lines, and raw documents (still bytes).

Nothing here holds more than one block plus one record in memory, whatever the file's size (a Parquet file: one
batch of rows of its text column). A record longer than ``max_record_bytes`` is dropped while it streams past and
reported as ``None``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow
import pyarrow.parquet as pq
import zstandard
from contract.formats import DEFAULT_TEXT_FIELD, file_format

from pile.inputs import InputFile

BLOCK_BYTES = 1 << 20
MAX_RECORD_BYTES = 256 << 20
TEXT_SEPARATOR = b"<|endoftext|>"  # a .txt line holding only this separates two documents
PARQUET_BATCH_ROWS = 256  # rows of the text column decoded at a time

# Errors that end one input file (truncated or corrupt data); the run goes on with the next file.
READ_ERRORS = (OSError, EOFError, zlib.error, zstandard.ZstdError, pyarrow.ArrowException)


class ReadError(Exception):
    """Reading an input stopped early; the message names the original error."""


def iter_blocks(path: str | Path, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """The decompressed bytes of a file in blocks; raises EOFError when a .gz or .zst stream is cut short.

    Compressed files go through streaming decoders, so everything decodable before a cut is yielded first.
    """
    found = file_format(str(path))
    compression = found.compression if found else ""
    with open(path, "rb") as f:
        if compression == "zstd":
            yield from _stream_blocks(f, block_bytes, zstandard.ZstdDecompressor().decompressobj, "zstd")
        elif compression == "gzip":
            yield from _stream_blocks(f, block_bytes, lambda: zlib.decompressobj(wbits=31), "gzip")
        else:
            while block := f.read(block_bytes):
                yield block


def _stream_blocks(f, block_bytes: int, new_frame, kind: str) -> Iterator[bytes]:
    """Decompresses every frame (zstd) or member (gzip) back to back; notices a file that ends inside one."""
    frame = new_frame()
    in_frame = False
    while data := f.read(block_bytes):
        while data:
            in_frame = True
            if out := frame.decompress(data):
                yield out
            if not frame.eof:
                break
            data, frame, in_frame = frame.unused_data, new_frame(), False
    if in_frame:
        raise EOFError(f"{kind} stream ended inside a frame (truncated file)")


def iter_lines(blocks: Iterable[bytes], max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[bytes | None]:
    """Lines without their ``\\n``; ``None`` stands for a line longer than ``max_record_bytes``."""
    parts: list[bytes] = []
    size = 0
    too_long = False
    for block in blocks:
        pieces = block.split(b"\n")
        for piece in pieces[:-1]:
            if too_long or size + len(piece) > max_record_bytes:
                yield None
            else:
                yield b"".join((*parts, piece)) if parts else piece
            parts, size, too_long = [], 0, False
        tail = pieces[-1]
        if too_long or size + len(tail) > max_record_bytes:
            parts, size, too_long = [], 0, True
        elif tail:
            parts.append(tail)
            size += len(tail)
    if too_long:
        yield None
    elif parts:
        yield b"".join(parts)


def iter_text_documents(
    lines: Iterable[bytes | None], max_record_bytes: int = MAX_RECORD_BYTES
) -> Iterator[bytes | None]:
    """Plain-text documents: the lines between ``<|endoftext|>`` lines (a file without one is one document).

    The newline before a separator line, like the one that ends the file, is not part of the document. A document
    that outgrows ``max_record_bytes`` is cut after a line (its newline kept) and goes on as a new document.
    """
    lines_held: list[bytes] = []
    size = 0
    for line in lines:
        if line is not None and line.rstrip(b"\r") == TEXT_SEPARATOR:
            yield b"\n".join(lines_held)
            lines_held, size = [], 0
            continue
        if lines_held and (line is None or size + len(line) + 1 > max_record_bytes):
            yield b"\n".join(lines_held) + b"\n"
            lines_held, size = [], 0
        if line is None:
            yield None
            continue
        lines_held.append(line)
        size += len(line) + 1
    if lines_held:
        yield b"\n".join(lines_held)


def iter_parquet_texts(
    path: str | Path, text_field: str = DEFAULT_TEXT_FIELD, max_record_bytes: int = MAX_RECORD_BYTES
) -> Iterator[bytes | None]:
    """The ``text_field`` column of a Parquet file as UTF-8 bytes, row by row (a null as ``b""``).

    Only that column is decoded, ``PARQUET_BATCH_ROWS`` rows at a time, row group after row group; a row group
    that cannot be decoded raises after every row before it was yielded.
    """
    with pq.ParquetFile(path) as parquet:
        column = parquet.schema_arrow.field(text_field) if text_field in parquet.schema_arrow.names else None
        if column is None:
            names = ", ".join(parquet.schema_arrow.names)
            raise OSError(f"no column {text_field!r} (columns: {names}); set corpus.text_field")
        if not (pyarrow.types.is_string(column.type) or pyarrow.types.is_large_string(column.type)):
            raise OSError(f"column {text_field!r} holds {column.type}, not strings")
        for group in range(parquet.num_row_groups):  # one group at a time: a damaged one keeps those before
            batches = parquet.iter_batches(PARQUET_BATCH_ROWS, [group], [text_field], use_threads=False)
            for batch in batches:
                for value in batch.column(0).to_pylist():
                    raw = (value or "").encode("utf-8", "surrogatepass")
                    yield raw if len(raw) <= max_record_bytes else None


def iter_records(
    source: InputFile, max_record_bytes: int = MAX_RECORD_BYTES, text_field: str = DEFAULT_TEXT_FIELD
) -> Iterator[bytes | None]:
    """The raw records of an input: JSON lines for ``jsonl``, documents for ``txt``, the text column's values for
    ``parquet``.

    Raises ReadError (after yielding every record before the damage) for a truncated or corrupt file.
    """
    if source.kind == "parquet":
        records = iter_parquet_texts(source.path, text_field, max_record_bytes)
    else:
        lines = iter_lines(iter_blocks(source.path), max_record_bytes)
        records = iter_text_documents(lines, max_record_bytes) if source.kind == "txt" else lines
    try:
        yield from records
    except READ_ERRORS as e:
        raise ReadError(f"{source.relative}: {type(e).__name__}: {e}") from e
