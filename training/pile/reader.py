"""Streaming reads of input files: decompressed blocks, lines, and raw documents (still bytes).

Nothing here holds more than one block plus one record in memory, whatever the file's size (a Parquet file: one
batch of rows of its text column). A record longer than ``max_record_bytes`` is dropped while it streams past and
reported as ``None``.

A block is at most about ``block_bytes`` decompressed, however well the file compresses: gzip is inflated with a
``max_length``, zstd fed whole blocks a few at a time (a zstd block decompresses to at most 128 KiB, RFC 8878
3.1.1.2.3), so 16 KB of a .zst file holding 512 MiB of zeros is 512 blocks of 1 MiB, not one of 512 MiB. A file
that decompresses to more than ``MAX_EXPANSION`` times the compressed bytes read (past ``EXPANSION_FLOOR_BYTES``)
is a bomb, not a corpus: it stops as a truncated file does, every record before kept, the reason in the manifest's
``files_failed``.
"""

from __future__ import annotations

import os
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
# Decompressed bytes per compressed byte read: text compresses 3-10 times, deflate at most 1,032 (pure filler).
MAX_EXPANSION = 1000
EXPANSION_FLOOR_BYTES = 16 << 20  # what a file may decompress to whatever its ratio
ZSTD_BLOCK_BYTES = 128 << 10  # the most one zstd block decompresses to (Block_Maximum_Size)
TEXT_SEPARATOR = b"<|endoftext|>"  # a .txt line holding only this separates two documents
PARQUET_BATCH_ROWS = 256  # rows of the text column decoded at a time

# Errors that end one input file (truncated or corrupt data); the run goes on with the next file.
READ_ERRORS = (OSError, EOFError, zlib.error, zstandard.ZstdError, pyarrow.ArrowException)  # ExpansionError too


class ReadError(Exception):
    """Reading an input stopped early; the message names the original error."""


class ExpansionError(OSError):
    """A compressed input that decompresses past ``MAX_EXPANSION`` times its size: a bomb, refused."""


def iter_blocks(path: str | Path, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """The decompressed bytes of a file in blocks of at most about ``block_bytes``; raises EOFError when a .gz or
    .zst stream is cut short, ExpansionError past ``MAX_EXPANSION``.

    Compressed files go through streaming decoders, so everything decodable before a cut is yielded first.
    """
    found = file_format(str(path))
    compression = found.compression if found else ""
    with open(path, "rb") as f:
        if compression == "zstd":
            yield from _bounded(f, _zstd_blocks(f, block_bytes), path)
        elif compression == "gzip":
            yield from _bounded(f, _gzip_blocks(f, block_bytes), path)
        else:
            while block := f.read(block_bytes):
                yield block


def _bounded(f, blocks: Iterator[bytes], path: str | Path) -> Iterator[bytes]:
    """``blocks`` of the compressed file ``f``, until they outgrow ``MAX_EXPANSION`` times what was read of it."""
    total = 0
    for block in blocks:
        total += len(block)
        if total > max(EXPANSION_FLOOR_BYTES, MAX_EXPANSION * f.tell()):
            raise ExpansionError(
                f"{total:,} bytes decompressed from {f.tell():,}: over {MAX_EXPANSION:,} times, a compression bomb; "
                "the rest of the file is refused"
            )
        yield block


def _gzip_blocks(f, block_bytes: int) -> Iterator[bytes]:
    """Every member of a gzip file back to back, inflated ``block_bytes`` at most at a time."""
    member, in_member = zlib.decompressobj(wbits=31), False
    while data := f.read(block_bytes):
        while data:
            in_member = True
            out = member.decompress(data, block_bytes)
            data = member.unconsumed_tail
            if out:
                yield out
            if member.eof:
                data, member, in_member = member.unused_data, zlib.decompressobj(wbits=31), False
    if in_member:
        while out := member.decompress(b"", block_bytes):  # what the last read left inside zlib
            yield out
        if not member.eof:
            raise EOFError("gzip stream ended inside a frame (truncated file)")


ZSTD_MAGIC, SKIPPABLE_MAGIC = 0xFD2FB528, 0x184D2A50  # a skippable frame's magic is 0x184D2A5? (RFC 8878 3.1.2)


def _zstd_blocks(f, block_bytes: int) -> Iterator[bytes]:
    """Every frame of a zstd file back to back, its blocks fed to the decoder ``block_bytes // 128 KiB`` at a time,
    found by their headers (RFC 8878 3.1.1): no call decompresses more than that many blocks can hold."""
    while magic := f.read(4):
        pending, decoder = [magic], None
        try:
            number = int.from_bytes(_exactly(f, 4, magic), "little")
            if number & 0xFFFFFFF0 == SKIPPABLE_MAGIC:  # skipped, never held
                if f.seek(int.from_bytes(_exactly(f, 4), "little"), os.SEEK_CUR) > os.fstat(f.fileno()).st_size:
                    raise EOFError("zstd stream ended inside a skippable frame (truncated file)")
                continue
            if number != ZSTD_MAGIC:
                raise zstandard.ZstdError("unknown frame descriptor (not a zstd frame)")
            decoder = zstandard.ZstdDecompressor().decompressobj()
            descriptor = _exactly(f, 1)
            pending.append(descriptor + _exactly(f, _frame_header_bytes(descriptor[0])))
            last, held = False, 0
            while not last:
                header = _exactly(f, 3)
                value = int.from_bytes(header, "little")
                last, kind, size = bool(value & 1), value >> 1 & 3, value >> 3
                if kind == 3 or size > ZSTD_BLOCK_BYTES:
                    raise zstandard.ZstdError(f"corrupt block header (type {kind}, size {size:,})")
                pending += [header, _exactly(f, 1 if kind == 1 else size)]
                held += ZSTD_BLOCK_BYTES
                if last and descriptor[0] & 4:  # Content_Checksum_flag
                    pending.append(_exactly(f, 4))
                if last or held + ZSTD_BLOCK_BYTES > block_bytes:
                    if out := decoder.decompress(b"".join(pending)):
                        yield out
                    pending, held = [], 0
        except EOFError:
            if decoder is not None and (out := decoder.decompress(b"".join(pending))):
                yield out  # the whole blocks before the cut
            raise


def _frame_header_bytes(descriptor: int) -> int:
    """Bytes of a frame header after its descriptor: window descriptor, dictionary id, frame content size."""
    single_segment = descriptor >> 5 & 1
    window = 0 if single_segment else 1
    dictionary = (0, 1, 2, 4)[descriptor & 3]
    content_size = (single_segment, 2, 4, 8)[descriptor >> 6]
    return window + dictionary + content_size


def _exactly(f, size: int, head: bytes = b"") -> bytes:
    """``size`` bytes of ``f`` (``head`` first, if already read); EOFError when the file ends before them."""
    data = head + f.read(size - len(head))
    if len(data) < size:
        raise EOFError("zstd stream ended inside a frame (truncated file)")
    return data


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
