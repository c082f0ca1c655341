"""Chunks of raw records in, token streams out: the work each pool process does.

A chunk's documents are parsed, encoded, followed by end-of-text and assigned to the train or validation split
by a hash of (input name, record index), so the split does not depend on scheduling or on reruns.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections import Counter
from collections.abc import Iterable, Iterator

import numpy as np
from contract.formats import DEFAULT_TEXT_FIELD
from tokenizers import Tokenizer

from pile.bpe import encoder_from_json, eot_id
from pile.documents import Skip, parse_record

CHUNK_BYTES = 1 << 20
CHUNK_RECORDS = 1 << 16  # a chunk of blank lines (no bytes) is flushed by their count


@dataclasses.dataclass(frozen=True)
class Chunk:
    """Consecutive raw records of one input, the first of them at ``first_index``, and how its source is parsed."""

    input_name: str
    kind: str
    first_index: int
    records: list[bytes | None]
    pile_set_names: frozenset[str] = frozenset()
    text_field: str = DEFAULT_TEXT_FIELD


@dataclasses.dataclass
class ChunkResult:
    """The token streams of a chunk (documents each followed by end-of-text) and what was read."""

    train: np.ndarray
    validation: np.ndarray
    documents_read: int
    documents_written: int
    skipped: Counter[str]
    bytes_read: int
    text_bytes: int = 0  # UTF-8 bytes of the written documents' text


@dataclasses.dataclass(frozen=True)
class EncodeSettings:
    """Everything a worker needs besides the chunk; picklable, sent once per worker."""

    tokenizer_json: str
    dtype: str
    validation_fraction: float


def chunk_records(
    records: Iterable[bytes | None],
    input_name: str,
    kind: str,
    chunk_bytes: int = CHUNK_BYTES,
    pile_set_names: frozenset[str] = frozenset(),
    text_field: str = DEFAULT_TEXT_FIELD,
    max_records: int = CHUNK_RECORDS,
) -> Iterator[Chunk]:
    """Groups records into chunks of about ``chunk_bytes`` and at most ``max_records`` records, each parsed with
    ``pile_set_names`` and ``text_field``.

    When reading ``records`` raises, the part-filled chunk is yielded first: no record read is lost.
    """
    batch: list[bytes | None] = []
    first = size = 0
    error: Exception | None = None
    try:
        for index, record in enumerate(records):
            if not batch:
                first = index
            batch.append(record)
            size += len(record) if record is not None else 0
            if size >= chunk_bytes or len(batch) >= max_records:
                yield Chunk(input_name, kind, first, batch, pile_set_names, text_field)
                batch, size = [], 0
    except Exception as e:  # a read error: hand over what was read, then raise it
        error = e
    if batch:
        yield Chunk(input_name, kind, first, batch, pile_set_names, text_field)
    if error is not None:
        raise error


def is_validation(input_name: str, index: int, fraction: float) -> bool:
    """Whether record ``index`` of ``input_name`` belongs to the validation split."""
    if fraction <= 0:
        return False
    digest = hashlib.blake2b(f"{input_name}\n{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") < fraction * 2**64


class Encoder:
    """Parses and encodes chunks with one tokenizer.

    Args:
        settings: what to encode with.
        tokenizer: ``settings.tokenizer_json`` already loaded by ``encoder_from_json``, so that a process that
            has one does not parse it again; ``None`` loads it.
    """

    def __init__(self, settings: EncodeSettings, tokenizer: Tokenizer | None = None):
        self.settings = settings
        self.tokenizer = tokenizer or encoder_from_json(settings.tokenizer_json)
        self.eot = eot_id(self.tokenizer)
        self.dtype = np.dtype(settings.dtype).newbyteorder("<")

    def encode(self, chunk: Chunk) -> ChunkResult:
        skipped: Counter[str] = Counter()
        texts: dict[str, list[str]] = {"train": [], "validation": []}
        for offset, raw in enumerate(chunk.records):
            parsed = parse_record(chunk.kind, raw, chunk.pile_set_names, chunk.text_field)
            if isinstance(parsed, Skip):
                skipped[parsed.value] += 1
                continue
            index = chunk.first_index + offset
            split = (
                "validation" if is_validation(chunk.input_name, index, self.settings.validation_fraction) else "train"
            )
            texts[split].append(parsed)
        return ChunkResult(
            train=self._tokens(texts["train"]),
            validation=self._tokens(texts["validation"]),
            documents_read=len(chunk.records),
            documents_written=len(texts["train"]) + len(texts["validation"]),
            skipped=skipped,
            bytes_read=sum(len(r) for r in chunk.records if r is not None),
            text_bytes=sum(len(text.encode()) for split in texts.values() for text in split),
        )

    def _tokens(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0, dtype=self.dtype)
        eot = np.array([self.eot], dtype=self.dtype)
        encodings = self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        # One array per document, then one concatenation: a fifth cheaper than one long Python list of ids.
        return np.concatenate([part for e in encodings for part in (np.array(e.ids, dtype=self.dtype), eot)])


_worker_encoder: Encoder | None = None


def single_threaded() -> None:
    """Keeps ``tokenizers`` to one thread in this process (set before its first parallel call)."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["RAYON_NUM_THREADS"] = "1"


def init_worker(settings: EncodeSettings) -> None:
    """Pool initializer: one encoder per process, tokenizer threads off (the pool is the parallelism)."""
    global _worker_encoder
    single_threaded()
    _worker_encoder = Encoder(settings)


def encode_in_worker(chunk: Chunk) -> ChunkResult:
    """Pool task."""
    assert _worker_encoder is not None, "init_worker was not run in this process"
    return _worker_encoder.encode(chunk)
