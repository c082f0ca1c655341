"""``preprocess.py shards``: every input of this host into packed token shards and a manifest part.

Restarts: each input writes ``progress/<host>/<input>.json`` after its shards are complete; a rerun skips inputs
whose record is there (same source, path and settings, shards present, no read error) and redoes the others from
the start, first deleting whatever a killed run left of them. The manifest part is written last, from those records.
With a mix, every input's shards are of its source (``ShardInfo.source``) and the manifest counts each source.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import signal
from collections import Counter
from pathlib import Path

from contract.formats import DEFAULT_TEXT_FIELD
from data.token_shards import (
    SPLITS,
    TOKENIZER_FILE,
    Manifest,
    ShardInfo,
    add_source_counts,
    sha256_of,
    token_dtype,
    write_manifest_part,
)

from pile.bpe import encoder_from_json, eot_id, tokenizer_file
from pile.encode import CHUNK_BYTES, EncodeSettings, chunk_records
from pile.inputs import InputFile, NoDocumentsError, Source, corpus_sources, find_inputs, unsupported_files
from pile.packing import SplitWriter, sequences_per_shard
from pile.progress import Progress
from pile.reader import ReadError, iter_records
from pile.runner import make_runner

log = logging.getLogger("preprocess")
PROGRESS_DIR = "progress"
KILL_AFTER_SHARDS_ENV = "PREPROCESS_KILL_AFTER_SHARDS"  # tests: SIGKILL this process after that many shards


@dataclasses.dataclass(frozen=True)
class ShardsConfig:
    input_dir: Path
    tokenizer: Path  # tokenizer.json, or a folder holding it
    output_dir: Path
    host: str
    sequence_length: int = 2048
    shard_size_mb: float = 1024
    validation_fraction: float = 0.0005
    pile_set_names: frozenset[str] = frozenset()  # without sources
    text_field: str = DEFAULT_TEXT_FIELD  # without sources
    workers: int = 1
    progress_seconds: float = 30.0
    chunk_bytes: int = CHUNK_BYTES
    sources: tuple[Source, ...] = ()  # a mix, each source read from <input_dir>/<name>/; none: input_dir

    def input_sources(self) -> tuple[Source, ...]:
        """The mix's sources, or the one source "" of ``input_dir`` with ``pile_set_names`` and ``text_field``."""
        return corpus_sources(self.sources, self.text_field, self.pile_set_names)


@dataclasses.dataclass
class InputRecord:
    """What one input produced; stored as its "done" record."""

    input: str
    settings: dict
    shards: list[ShardInfo]
    documents_read: int = 0
    documents_written: int = 0
    documents_skipped: dict[str, int] = dataclasses.field(default_factory=dict)
    error: str | None = None
    source: str = ""
    text_bytes: int = 0  # UTF-8 bytes of the written documents' text

    def source_counts(self) -> dict[str, int]:
        """This input's share of its source's counts in the manifest (``SOURCE_COUNTS``)."""
        split_tokens = {split: sum(s.tokens for s in self.shards if s.split == split) for split in SPLITS}
        return {
            "files": 1,
            "documents_read": self.documents_read,
            "documents_written": self.documents_written,
            "bytes": self.text_bytes,
            "tokens": sum(split_tokens.values()),
            "train_tokens": split_tokens["train"],
            "valid_tokens": split_tokens["validation"],
        }

    @classmethod
    def load(cls, path: Path) -> InputRecord:
        body = json.loads(path.read_text())
        body["shards"] = [ShardInfo(**s) for s in body["shards"]]
        return cls(**body)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True))
        os.replace(tmp, path)


class _KillSwitch:
    """Fault injection for the restart test: SIGKILL after ``PREPROCESS_KILL_AFTER_SHARDS`` shards."""

    def __init__(self) -> None:
        self.remaining = int(os.environ.get(KILL_AFTER_SHARDS_ENV, "0"))

    def __call__(self, shard: ShardInfo) -> None:
        if self.remaining:
            self.remaining -= 1
            if not self.remaining:
                os.kill(os.getpid(), signal.SIGKILL)


class ShardsJob:
    """One host's shards run; ``run()`` returns the manifest part it wrote."""

    def __init__(self, config: ShardsConfig):
        self.config = config
        self.sources = {source.name: source for source in config.input_sources()}
        self.inputs = find_inputs(config.input_dir, list(self.sources.values()))
        path = tokenizer_file(config.tokenizer)
        self.tokenizer_path = path
        self.tokenizer_json = path.read_text()
        self.tokenizer = encoder_from_json(self.tokenizer_json)  # also the serial runner's: parsed once
        self.manifest = Manifest(
            sequence_length=config.sequence_length,
            dtype=token_dtype(self.tokenizer.get_vocab_size()),
            vocab_size=self.tokenizer.get_vocab_size(),
            eot_token_id=eot_id(self.tokenizer),
            tokenizer_sha256=sha256_of(path),
            hosts=[config.host],
            files_unsupported=unsupported_files(config.input_dir, list(self.sources.values())),
        )
        self.settings = {  # an input done with other settings is redone
            "tokenizer_sha256": self.manifest.tokenizer_sha256,
            "sequence_length": config.sequence_length,
            "records_per_shard": sequences_per_shard(
                config.shard_size_mb, config.sequence_length + 1, self.manifest.dtype
            ),
            "validation_fraction": config.validation_fraction,
        }
        self.progress = Progress(config.host, config.progress_seconds)
        self._runner = None
        self._kill_switch = _KillSwitch()
        self._check_output_tokenizer()

    def _check_output_tokenizer(self) -> None:
        existing = self.config.output_dir / TOKENIZER_FILE
        if existing.is_file() and sha256_of(existing) != self.manifest.tokenizer_sha256:
            raise ValueError(f"{existing} differs from {self.tokenizer_path}: that folder holds another dataset")

    def _settings(self, file: InputFile) -> dict:
        """What an input's shards depend on: the run's settings and its source's filter and text field."""
        source = self.sources[file.source]
        return {**self.settings, "pile_set_names": sorted(source.pile_set_names), "text_field": source.text_field}

    def _record_path(self, source: InputFile) -> Path:
        return self.config.output_dir / PROGRESS_DIR / self.config.host / f"{source.name}.json"

    def _prefix(self, source: InputFile) -> str:
        return f"{self.config.host}-{source.name}"

    def run(self) -> Manifest:
        log.info(
            "%s: %d inputs, tokenizer %s, settings %s%s",
            self.config.host,
            len(self.inputs),
            self.tokenizer_path,
            self.settings,
            f", sources {list(self.config.sources)}" if self.config.sources else "",
        )
        try:
            for number, source in enumerate(self.inputs, 1):
                record = self._completed(source)
                if record is None:
                    log.info("input %d/%d: %s", number, len(self.inputs), source.relative)
                    record = self._process(source)
                else:
                    log.info("input %d/%d: %s already done, skipped", number, len(self.inputs), source.relative)
                self._add(record)
        finally:
            if self._runner is not None:
                self._runner.close()
        self.progress.report()
        if self.manifest.documents_written == 0:
            self._remove_records()
            raise NoDocumentsError(
                f"no usable documents in {self.config.input_dir}: {self.manifest.documents_read} read, skipped "
                f"{self.manifest.documents_skipped or 'none'}, failed files {self.manifest.files_failed or 'none'}, "
                f"unsupported files {self.manifest.files_unsupported or 'none'}"
            )
        self._copy_tokenizer()
        self.manifest.shards.sort(key=lambda shard: shard.file)
        write_manifest_part(self.config.output_dir, self.config.host, self.manifest)
        return self.manifest

    def _completed(self, source: InputFile) -> InputRecord | None:
        path = self._record_path(source)
        if not path.is_file():
            return None
        record = InputRecord.load(path)
        if record.error or (record.source, record.input) != (source.source, source.relative):
            return None
        if record.settings != self._settings(source):
            return None
        if not all((self.config.output_dir / shard.file).is_file() for shard in record.shards):
            return None
        return record

    def _remove_leftovers(self, source: InputFile) -> None:
        pattern = re.compile(re.escape(self._prefix(source)) + r"-\d{5}\.tfrecord(\.tmp)?")
        for split in SPLITS:
            folder = self.config.output_dir / split
            for path in folder.glob("*.tfrecord*") if folder.is_dir() else ():
                if pattern.fullmatch(path.name):
                    path.unlink()

    def _process(self, source: InputFile) -> InputRecord:
        self._record_path(source).unlink(missing_ok=True)
        self._remove_leftovers(source)
        if self._runner is None:
            settings = EncodeSettings(
                self.tokenizer_json,
                self.manifest.dtype,
                self.config.validation_fraction,
            )
            self._runner = make_runner(settings, self.config.workers, self.tokenizer)
        writers = [
            SplitWriter(
                self.config.output_dir,
                split,
                self._prefix(source),
                self.config.sequence_length + 1,
                self.manifest.dtype,
                self.settings["records_per_shard"],
                self.manifest.eot_token_id,
                on_shard=self._kill_switch,
                source=source.source,
            )
            for split in SPLITS
        ]
        record = InputRecord(input=source.relative, settings=self._settings(source), shards=[], source=source.source)
        skipped: Counter[str] = Counter()
        spec = self.sources[source.source]
        records = iter_records(source, text_field=spec.text_field)
        chunks = chunk_records(
            records, source.name, source.kind, self.config.chunk_bytes, spec.pile_set_names, spec.text_field
        )
        try:
            for result in self._runner.map(chunks):
                writers[0].add(result.train)
                writers[1].add(result.validation)
                record.documents_read += result.documents_read
                record.documents_written += result.documents_written
                record.text_bytes += result.text_bytes
                skipped.update(result.skipped)
                self.progress.update(
                    result.documents_read, result.bytes_read, len(result.train) + len(result.validation)
                )
        except ReadError as e:
            record.error = str(e)
            log.warning("input %s stopped early, keeping what was read before: %s", source.relative, e)
        record.shards = [shard for writer in writers for shard in writer.finish()]
        record.documents_skipped = dict(sorted(skipped.items()))
        record.save(self._record_path(source))
        return record

    def _add(self, record: InputRecord) -> None:
        self.manifest.shards.extend(record.shards)
        self.manifest.documents_read += record.documents_read
        self.manifest.documents_written += record.documents_written
        skipped = Counter(self.manifest.documents_skipped)
        skipped.update(record.documents_skipped)
        self.manifest.documents_skipped = dict(sorted(skipped.items()))
        if record.error:
            self.manifest.files_failed[record.input] = record.error
        if record.source:
            add_source_counts(self.manifest.sources, record.source, record.source_counts())

    def _remove_records(self) -> None:
        """Undoes this host's bookkeeping when it produced nothing, so the output folder is left as it was."""
        shutil.rmtree(self.config.output_dir / PROGRESS_DIR / self.config.host, ignore_errors=True)
        for folder in (PROGRESS_DIR, *SPLITS, ""):
            path = self.config.output_dir / folder
            if path.is_dir() and not any(path.iterdir()):
                path.rmdir()

    def _copy_tokenizer(self) -> None:
        target = self.config.output_dir / TOKENIZER_FILE
        tmp = target.with_name(f"{TOKENIZER_FILE}.{self.config.host}.tmp")
        shutil.copyfile(self.tokenizer_path, tmp)
        os.replace(tmp, target)


def run_shards(config: ShardsConfig) -> Manifest:
    """Runs the shards job of one host; raises NoDocumentsError when nothing could be tokenized."""
    return ShardsJob(config).run()
