"""The Plan summary's words on a mix of sources: each source's share of the training sequences, its tokens, and the
epochs of it that training reads (a small source repeats, a large one is subsampled).

Before preprocessing a source's tokens are estimated from its files' sizes (``ESTIMATE``: assumed ratios, labelled
"estimated" wherever shown); a dataset that exists has them counted in its manifests (``sources`` of each part).
"""

from __future__ import annotations

import json
from typing import Any

from infra.plan_step.execution_input import WorkflowInput
from infra.plan_step.object_store import ObjectStore
from infra.training_code import training_module

# Assumed, not measured: text bytes a stored byte (zstd and gzip of JSON lines, Parquet's own compression: about 3;
# plain files: 1), and UTF-8 bytes a token (GPT-2's BPE on English web text: about 4).
TEXT_BYTES_PER_STORED_BYTE = {"zstd": 3.0, "gzip": 3.0, "parquet": 3.0, "": 1.0}
BYTES_PER_TOKEN = 4.0


def estimated_tokens(files: list[tuple[str, int]]) -> int:
    """A source's document tokens from its files' sizes (``TEXT_BYTES_PER_STORED_BYTE``, ``BYTES_PER_TOKEN``)."""
    formats = training_module("formats")
    text_bytes = 0.0
    for uri, size in files:
        found = formats.file_format(uri)
        kind = "parquet" if found.records == "parquet" else found.compression
        text_bytes += size * TEXT_BYTES_PER_STORED_BYTE[kind]
    return round(text_bytes / BYTES_PER_TOKEN)


def counted_tokens(store: ObjectStore, manifests: list[str]) -> dict[str, int]:
    """Each source's training tokens, summed over the dataset's manifest parts ({} for a dataset of one source)."""
    totals: dict[str, int] = {}
    for uri in manifests:
        for name, counts in json.loads(store.read_bytes(uri)).get("sources", {}).items():
            totals[name] = totals.get(name, 0) + int(counts.get("train_tokens", 0))
    return totals


def mix_sources(inp: WorkflowInput, tokens: dict[str, int], counted: bool) -> list[dict[str, Any]]:
    """Each source's share (of the weights' sum), its tokens, the training tokens drawn from it and their epochs."""
    total = sum(s.weight for s in inp.corpus.sources)
    rows = []
    for source in inp.corpus.sources:
        share = source.weight / total
        drawn = share * inp.training.train_tokens
        have = tokens.get(source.name, 0)
        rows.append(
            {
                "name": source.name,
                "share": round(share, 6),
                "tokens": have,
                "tokens_are": "counted" if counted else "estimated",
                "train_tokens": round(drawn),
                "epochs": round(drawn / have, 3) if have else None,
            }
        )
    return rows


def mix_line(rows: list[dict[str, Any]]) -> str:
    """``web 70% of 1.0 B tokens (~2.1 B estimated: 0.48 epochs), code 30% (...: 3.1 epochs, repeats)``."""
    if not rows:
        return "one source (no mix)"
    parts = []
    for row in rows:
        if row["epochs"] is None:
            seen = "no tokens found"
        else:
            verdict = "repeats" if row["epochs"] > 1 else "subsampled"
            seen = f"{row['epochs']:.2f} epochs, {verdict}"
        tokens = f"{row['tokens'] / 1e6:,.1f} M tokens {row['tokens_are']}"
        parts.append(f"{row['name']} {row['share']:.0%} = {row['train_tokens'] / 1e6:,.1f} M ({tokens}: {seen})")
    return "; ".join(parts)
