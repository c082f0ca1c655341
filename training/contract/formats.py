"""The corpus file formats preprocessing reads, by file name: the one table both sides use.

The Plan step (``infra/plan_step``) lists a corpus with it and refuses one with no readable file; preprocessing
(``training/pile/inputs.py``) picks each file's reader from it. Standard library only.

Example::

    >>> file_format("CC-MAIN-2024/000_00000.parquet")
    Format(suffix='.parquet', records='parquet', compression='')
    >>> file_format("notes.md") is None
    True
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Format:
    """How one kind of file is read.

    Args:
        suffix: the file name's ending (matched without regard to case).
        records: ``jsonl`` (one JSON document a line), ``txt`` (plain text, ``<|endoftext|>`` lines between
            documents) or ``parquet`` (a string column, read row group by row group).
        compression: ``zstd``, ``gzip`` or ``""`` (none, or inside the format as for Parquet).
    """

    suffix: str
    records: str
    compression: str


# Longest suffix first: the first match decides. Who ships what: docs/corpora.md.
FORMATS = (
    Format(".jsonl.zstd", "jsonl", "zstd"),  # DCLM-baseline
    Format(".jsonl.zst", "jsonl", "zstd"),  # The Pile, pile-uncopyrighted, SlimPajama, Common Pile
    Format(".jsonl.gz", "jsonl", "gzip"),  # Common Pile
    Format(".json.zst", "jsonl", "zstd"),
    Format(".json.gz", "jsonl", "gzip"),  # Dolma
    Format(".parquet", "parquet", ""),  # FineWeb, FineWeb-Edu, deduplicated Pile on the Hugging Face Hub
    Format(".jsonl", "jsonl", ""),
    Format(".txt", "txt", ""),
)
SUFFIXES = tuple(f.suffix for f in FORMATS)
DEFAULT_TEXT_FIELD = "text"


def file_format(name: str) -> Format | None:
    """The format of a file named ``name`` (a path or an S3 key), or None for one preprocessing cannot read."""
    lower = name.lower()
    return next((f for f in FORMATS if lower.endswith(f.suffix)), None)
