"""The on-disk format shared by preprocessing (writer) and training (reader).

A dataset is one folder:

    <dataset>/
        tokenizer.json                      the BPE tokenizer every shard was encoded with
        train/<host>-<input>-<n>.tfrecord   packed token sequences
        validation/<host>-<input>-<n>.tfrecord
        manifests/<host>.json               one part per preprocessing host
        progress/<host>/<input>.json        preprocessing's per-input "done" records (for restarts)

In a mix of sources, ``<input>`` is ``<source>_<file>`` and each shard's ``ShardInfo.source`` names its source.

Each TFRecord record is one sequence of ``record_tokens`` (= context + 1) token ids stored as raw
little-endian ``uint16`` bytes (``uint32`` when the vocabulary exceeds 65,535), so training reads it
with ``tf.io.decode_raw`` after batching: 2 bytes a token, no protobuf.

Every host writes its own manifest part; ``read_manifest`` merges the parts and checks that they
agree (same tokenizer, sequence length and dtype). A shard appears in a manifest only after it was
written completely and renamed from its temporary name.

This module needs no TensorFlow: preprocessing workers write TFRecords with ``TFRecordWriter`` below.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import struct
from collections import Counter
from pathlib import Path
from typing import BinaryIO

import crc32c

FORMAT_VERSION = "gpt-token-shards/1"
TOKENIZER_FILE = "tokenizer.json"
MANIFESTS_DIR = "manifests"
SPLITS = ("train", "validation")
END_OF_TEXT = "<|endoftext|>"


def token_dtype(vocab_size: int) -> str:
    """The narrowest unsigned integer that holds every token id of the vocabulary."""
    return "uint16" if vocab_size <= 65_536 else "uint32"


def sha256_of(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- TFRecord, written without TensorFlow ---------------------------------------------------------


def _masked_crc(data: bytes) -> bytes:
    """TFRecord's CRC: CRC-32C rotated right by 15 bits plus a constant (see tensorflow/core/lib/hash/crc32c.h)."""
    crc = crc32c.crc32c(data)
    masked = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    return struct.pack("<I", masked)


class TFRecordWriter:
    """Appends records in the TFRecord framing: length, CRC of length, data, CRC of data.

    Example:
        >>> import io
        >>> f = io.BytesIO()
        >>> TFRecordWriter(f).write(b"\\x01\\x00")  # one uint16 token, id 1
        >>> len(f.getvalue()), f.getvalue()[:8]  # FRAMING_BYTES more, the length first
        (18, b'\\x02\\x00\\x00\\x00\\x00\\x00\\x00\\x00')
    """

    def __init__(self, file: BinaryIO):
        self._file = file

    def write(self, record: bytes) -> None:
        length = struct.pack("<Q", len(record))
        self._file.write(length + _masked_crc(length) + record + _masked_crc(record))


FRAMING_BYTES = 16  # a record's length (8), the length's CRC (4) and the data's CRC (4)


def read_records(file: BinaryIO, first: int, count: int, data_bytes: int) -> list[bytes]:
    """Records ``first`` .. ``first + count - 1`` of a shard of fixed-size records, with one read; CRCs checked.

    Every record of a shard has the same size, so record i starts at byte i * (data_bytes + FRAMING_BYTES).
    """
    framed = data_bytes + FRAMING_BYTES
    block = os.pread(file.fileno(), count * framed, first * framed)
    if len(block) != count * framed:
        raise ValueError(f"{file.name}: records {first}..{first + count - 1} lie beyond its end")
    records = []
    for offset in range(0, len(block), framed):
        header, record, crc = (
            block[offset : offset + 12],
            block[offset + 12 : offset + framed - 4],
            block[offset + framed - 4 : offset + framed],
        )
        if header[:8] != struct.pack("<Q", data_bytes) or crc != _masked_crc(record):
            raise ValueError(f"{file.name}: corrupt record {first + offset // framed}")
        records.append(record)
    return records


def read_tfrecords(path: str | os.PathLike) -> list[bytes]:
    """Every record of a TFRecord file, CRCs checked. For tests and tools; training uses tf.data."""
    records = []
    with open(path, "rb") as f:
        while header := f.read(12):
            (length,) = struct.unpack("<Q", header[:8])
            if header[8:] != _masked_crc(header[:8]):
                raise ValueError(f"{path}: corrupt record length at byte {f.tell() - 12}")
            record, crc = f.read(length), f.read(4)
            if crc != _masked_crc(record):
                raise ValueError(f"{path}: corrupt record at byte {f.tell() - length - 4}")
            records.append(record)
    return records


# --- Manifest -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ShardInfo:
    """One complete shard file. ``file`` is relative to the dataset folder, e.g. ``train/algo-1-00000.tfrecord``.

    ``tokens`` counts document tokens (end-of-text included); ``padding_tokens`` counts the end-of-text ids that
    fill the last sequence of an input, so ``tokens + padding_tokens == sequences * record_tokens``.
    """

    file: str
    split: str
    sequences: int
    tokens: int
    sha256: str
    padding_tokens: int = 0
    source: str = ""  # the mix's source the shard's text came from ("" for a corpus of one source)


# Per source of a mix, the manifest's ``sources`` counts: input files, documents, UTF-8 bytes of the written
# documents' text, and document tokens (train + valid, and each split).
SOURCE_COUNTS = ("files", "documents_read", "documents_written", "bytes", "tokens", "train_tokens", "valid_tokens")


def add_source_counts(sources: dict[str, dict], name: str, counts: dict[str, int]) -> None:
    """Adds ``counts`` (``SOURCE_COUNTS``, missing ones 0) to ``sources[name]``, which it creates when absent."""
    totals = sources.setdefault(name, dict.fromkeys(SOURCE_COUNTS, 0))
    for key in SOURCE_COUNTS:
        totals[key] += counts.get(key, 0)


@dataclasses.dataclass
class Manifest:
    """What a dataset holds. A per-host part and the merged whole have the same shape."""

    sequence_length: int  # the model's context; each record holds sequence_length + 1 tokens
    dtype: str  # "uint16" or "uint32"
    vocab_size: int
    eot_token_id: int
    tokenizer_sha256: str
    shards: list[ShardInfo] = dataclasses.field(default_factory=list)
    documents_read: int = 0
    documents_written: int = 0  # documents_read less the skipped ones
    documents_skipped: dict[str, int] = dataclasses.field(default_factory=dict)  # reason -> count
    files_failed: dict[str, str] = dataclasses.field(default_factory=dict)  # input file -> error
    files_unsupported: list[str] = dataclasses.field(default_factory=list)  # files in no format it reads
    hosts: list[str] = dataclasses.field(default_factory=list)
    sources: dict[str, dict] = dataclasses.field(default_factory=dict)  # name -> SOURCE_COUNTS; {}: one source
    format: str = FORMAT_VERSION

    @property
    def record_tokens(self) -> int:
        return self.sequence_length + 1

    def split_shards(self, split: str) -> list[ShardInfo]:
        return [s for s in self.shards if s.split == split]

    def tokens(self, split: str | None = None) -> int:
        return sum(s.tokens for s in self.shards if split is None or s.split == split)

    def sequences(self, split: str | None = None) -> int:
        return sum(s.sequences for s in self.shards if split is None or s.split == split)

    def to_json(self) -> dict:
        body = dataclasses.asdict(self)
        body["totals"] = {
            "tokens_written": self.tokens(),
            "sequences_written": self.sequences(),
            **{f"{split}_tokens": self.tokens(split) for split in SPLITS},
        }
        return body

    @classmethod
    def from_json(cls, body: dict) -> Manifest:
        if body.get("format") != FORMAT_VERSION:
            raise ValueError(f"manifest format {body.get('format')!r} is not {FORMAT_VERSION!r}")
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in body.items() if k in fields}
        kwargs["shards"] = [ShardInfo(**s) for s in body.get("shards", [])]
        return cls(**kwargs)


def write_manifest_part(dataset_dir: str | os.PathLike, host: str, manifest: Manifest) -> Path:
    """Writes ``manifests/<host>.json`` atomically (temporary name, then rename)."""
    path = Path(dataset_dir) / MANIFESTS_DIR / f"{host}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest.to_json(), indent=2, sort_keys=True))
    os.replace(tmp, path)
    return path


def merge_manifests(parts: list[Manifest]) -> Manifest:
    """Joins per-host parts into one manifest; raises ValueError when they disagree."""
    if not parts:
        raise ValueError("no manifest parts to merge")
    first = parts[0]
    merged = Manifest(
        sequence_length=first.sequence_length,
        dtype=first.dtype,
        vocab_size=first.vocab_size,
        eot_token_id=first.eot_token_id,
        tokenizer_sha256=first.tokenizer_sha256,
    )
    skipped: Counter[str] = Counter()
    for part in parts:
        for name in ("sequence_length", "dtype", "vocab_size", "eot_token_id", "tokenizer_sha256"):
            if getattr(part, name) != getattr(first, name):
                raise ValueError(
                    f"manifest parts disagree on {name}: {getattr(first, name)!r} (host {first.hosts}) "
                    f"vs {getattr(part, name)!r} (host {part.hosts}); rerun preprocessing with one tokenizer"
                )
        merged.shards.extend(part.shards)
        merged.documents_read += part.documents_read
        merged.documents_written += part.documents_written
        skipped.update(part.documents_skipped)
        merged.files_failed.update(part.files_failed)
        merged.files_unsupported.extend(part.files_unsupported)
        merged.hosts.extend(part.hosts)
        for name, counts in part.sources.items():
            add_source_counts(merged.sources, name, counts)
    merged.sources = dict(sorted(merged.sources.items()))
    merged.documents_skipped = dict(sorted(skipped.items()))
    merged.shards.sort(key=lambda s: s.file)
    return merged


def read_manifest(dataset_dir: str | os.PathLike) -> Manifest:
    """Reads and merges every ``manifests/*.json`` of a dataset folder."""
    folder = Path(dataset_dir) / MANIFESTS_DIR
    paths = sorted(folder.glob("*.json"))
    if not paths:
        raise FileNotFoundError(f"no manifest in {folder}: run preprocessing first, or point the channel at its output")
    return merge_manifests([Manifest.from_json(json.loads(p.read_text())) for p in paths])


def verify_dataset(dataset_dir: str | os.PathLike, manifest: Manifest, *, checksums: bool = False) -> None:
    """Checks that every listed shard and the tokenizer exist (and, optionally, their checksums)."""
    root = Path(dataset_dir)
    tokenizer = root / TOKENIZER_FILE
    if not tokenizer.is_file():
        raise FileNotFoundError(f"{tokenizer} is missing; the manifest needs the tokenizer it was made with")
    if sha256_of(tokenizer) != manifest.tokenizer_sha256:
        raise ValueError(f"{tokenizer} does not match the manifest's tokenizer_sha256")
    for shard in manifest.shards:
        path = root / shard.file
        if not path.is_file():
            raise FileNotFoundError(f"{path} is listed in the manifest but missing")
        if checksums and sha256_of(path) != shard.sha256:
            raise ValueError(f"{path} does not match its sha256 in the manifest")
