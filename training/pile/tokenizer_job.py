"""``preprocess.py tokenizer``: trains the BPE tokenizer on a bounded sample spread over all inputs.

The sample takes the first documents of every input, each input's share being what is left of the budget over
the inputs left, so small inputs leave more to the large ones and no input is read past its share. With a mix,
source s's budget is sample_bytes x w_s / sum(w), spread the same way over its inputs (less if it has less text).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from contract.formats import DEFAULT_TEXT_FIELD
from data.token_shards import TOKENIZER_FILE

from pile.bpe import train_bpe
from pile.documents import Skip, parse_record
from pile.inputs import InputFile, NoDocumentsError, Source, corpus_sources, find_inputs
from pile.progress import Progress
from pile.reader import ReadError, iter_records

log = logging.getLogger("preprocess")


@dataclasses.dataclass
class SampleStats:
    documents_read: int = 0
    documents_used: int = 0
    bytes_used: int = 0
    source_bytes: Counter[str] = dataclasses.field(default_factory=Counter)  # bytes used by source
    skipped: Counter[str] = dataclasses.field(default_factory=Counter)
    files_failed: dict[str, str] = dataclasses.field(default_factory=dict)


def sample_texts(
    inputs: list[InputFile],
    sample_bytes: int,
    pile_set_names: frozenset[str] = frozenset(),
    stats: SampleStats | None = None,
    progress: Progress | None = None,
    text_field: str = DEFAULT_TEXT_FIELD,
) -> Iterator[str]:
    """Documents from every input, about ``sample_bytes`` of UTF-8 text in all, counted in ``stats``."""
    stats = stats if stats is not None else SampleStats()
    before = stats.bytes_used
    for position, source in enumerate(inputs):
        share = (sample_bytes - (stats.bytes_used - before)) // (len(inputs) - position)
        used = 0
        try:
            for raw in iter_records(source, text_field=text_field):
                if used >= share:
                    break
                stats.documents_read += 1
                text = parse_record(source.kind, raw, pile_set_names, text_field)
                if isinstance(text, Skip):
                    stats.skipped[text.value] += 1
                    continue
                size = len(raw or b"")
                used += size
                stats.bytes_used += size
                stats.source_bytes[source.source] += size
                stats.documents_used += 1
                if progress is not None:
                    progress.update(documents=1, bytes_read=size)
                yield text
        except ReadError as e:
            stats.files_failed[source.relative] = str(e)
            log.warning("input %s stopped early: %s", source.relative, e)


def mix_sample_texts(
    inputs: list[InputFile],
    sources: Sequence[Source],
    sample_bytes: int,
    stats: SampleStats | None = None,
    progress: Progress | None = None,
) -> Iterator[str]:
    """``sample_texts`` of each source's inputs, with sample_bytes x its weight / the sum of the weights."""
    total = sum(source.weight for source in sources)
    for source in sources:
        files = [file for file in inputs if file.source == source.name]
        budget = int(sample_bytes * source.weight / total)
        yield from sample_texts(files, budget, source.pile_set_names, stats, progress, source.text_field)


def run_tokenizer(
    input_dir: Path,
    output_dir: Path,
    vocab_size: int,
    sample_bytes: int,
    pile_set_names: frozenset[str] = frozenset(),
    progress_seconds: float = 30.0,
    text_field: str = DEFAULT_TEXT_FIELD,
    sources: Sequence[Source] = (),
) -> SampleStats:
    """Trains on the sample and writes ``<output_dir>/tokenizer.json``; raises NoDocumentsError on no text.

    ``sources``: a mix, each read from ``<input_dir>/<name>/``; none: ``input_dir`` with ``pile_set_names`` and
    ``text_field``.
    """
    sources = corpus_sources(sources, text_field, pile_set_names)
    inputs = find_inputs(input_dir, sources)
    stats = SampleStats()
    progress = Progress("tokenizer sample", progress_seconds, tokens=False)  # it reads text; the shards encode it
    log.info(
        "training a %d-token BPE vocabulary on up to %d bytes from %d inputs", vocab_size, sample_bytes, len(inputs)
    )
    tokenizer = train_bpe(mix_sample_texts(inputs, sources, sample_bytes, stats, progress), vocab_size)
    progress.report()
    if stats.documents_used == 0:
        raise NoDocumentsError(
            f"no usable documents in {input_dir}: {stats.documents_read} read, "
            f"skipped {dict(stats.skipped) or 'none'}, failed files {stats.files_failed or 'none'}"
        )
    if tokenizer.get_vocab_size() < vocab_size:
        log.warning("the sample allowed only %d tokens of the %d asked for", tokenizer.get_vocab_size(), vocab_size)
    output_dir.mkdir(parents=True, exist_ok=True)
    target = output_dir / TOKENIZER_FILE
    tmp = target.with_name(TOKENIZER_FILE + ".tmp")
    tokenizer.save(str(tmp))
    os.replace(tmp, target)
    log.info(
        "wrote %s: %d tokens from %d documents (%.1f MB%s); skipped %s; failed files %s",
        target,
        tokenizer.get_vocab_size(),
        stats.documents_used,
        stats.bytes_used / 1e6,
        "".join(f", {name} {size / 1e6:.2f} MB" for name, size in sorted(stats.source_bytes.items()) if name),
        dict(stats.skipped),
        stats.files_failed or "none",
    )
    return stats
