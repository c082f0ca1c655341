"""Decoding a finished dataset back to its documents: the check that nothing was lost or altered.

python -c "from pile.roundtrip import decode_dataset; print(len(decode_dataset('out')))"
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from data.token_shards import TOKENIZER_FILE, read_manifest, read_tfrecords
from tokenizers import Tokenizer


def dataset_tokens(dataset_dir: str | Path, split: str | None = None, source: str | None = None) -> np.ndarray:
    """Every token of the listed shards (of one split and source, or all), in shard-name order."""
    manifest = read_manifest(dataset_dir)
    parts = [
        np.frombuffer(
            b"".join(read_tfrecords(Path(dataset_dir) / shard.file)), dtype=np.dtype(manifest.dtype).newbyteorder("<")
        )
        for shard in manifest.shards
        if split in (None, shard.split) and source in (None, shard.source)
    ]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=manifest.dtype)


def decode_dataset(dataset_dir: str | Path, split: str | None = None, source: str | None = None) -> list[str]:
    """The documents of a dataset (of one split and source, or all): its token stream cut at end-of-text, padding
    dropped, each piece decoded."""
    manifest = read_manifest(dataset_dir)
    tokenizer = Tokenizer.from_file(str(Path(dataset_dir) / TOKENIZER_FILE))
    tokens = dataset_tokens(dataset_dir, split, source)
    ends = np.flatnonzero(tokens == manifest.eot_token_id)
    starts = np.concatenate(([0], ends[:-1] + 1)) if len(ends) else np.zeros(0, dtype=np.int64)
    return [tokenizer.decode(tokens[s:e].tolist()) for s, e in zip(starts, ends, strict=True) if e > s]
