"""What the Plan step checks about the execution's data before any job: where it reads, and what it reuses.

- Sources: the corpus (each source of a mix) and a given tokenizer must be in a bucket the jobs' role may read:
  the stack's raw bucket or one of the stage's ``source_buckets`` (a given tokenizer may also be in the datasets
  bucket). Preprocessing needs ``corpus.s3_uri`` or ``corpus.sources``: without either nothing is guessed (the
  raw bucket may hold several corpora), the execution fails naming the field.
- Reuse: an existing dataset (its ``manifests/``) is reused only if it was made for this request: the same
  sequence length, the same vocabulary and the same tokenizer (SHA-256 of ``tokenizer.json``), from the same
  text: the corpus fields and the split that the Plan step recorded when it planned the dataset's preprocessing
  (``dataset_source``, at ``source_record_uri``), the corpus fields only when the input names a corpus; otherwise
  the execution fails naming each field that differs, unless ``force_preprocess`` makes it anew. A dataset
  without a record (made before the record was kept) is not reused: nothing says what text it holds.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from infra.config import ConfigError
from infra.plan_step import requests
from infra.plan_step.execution_input import SourceInput, WorkflowInput, comma_names
from infra.plan_step.object_store import ObjectStore, split_uri
from infra.plan_step.settings import StackSettings


def corpus_sources(settings: StackSettings, inp: WorkflowInput) -> list[tuple[str, SourceInput]]:
    """Each source preprocessing reads, with the field that names it in messages: a mix's ``corpus.sources[i]``,
    else the corpus as one source named "" (``corpus``)."""
    if inp.corpus.sources:
        return [(f"corpus.sources[{i}]", source) for i, source in enumerate(inp.corpus.sources)]
    uri, corpus = requests.corpus_uri(settings, inp), inp.corpus
    return [("corpus", SourceInput("", uri, 1.0, corpus.text_field, corpus.pile_set_names))]


def check_corpus_given(settings: StackSettings, inp: WorkflowInput) -> None:
    """Raises ConfigError when preprocessing would run without a corpus: nothing is guessed."""
    if inp.corpus.s3_uri is None and not inp.corpus.sources:
        raise ConfigError(
            "corpus.s3_uri",
            None,
            f"the prefix of the corpus to preprocess, e.g. s3://{settings.raw_bucket}/pile/, or corpus.sources "
            f"(dataset {inp.dataset.name!r} does not exist yet, or force_preprocess is set)",
        )


def check_buckets(settings: StackSettings, inp: WorkflowInput) -> None:
    """Raises ConfigError for a source or a given tokenizer outside the buckets the jobs' role may read."""
    readable = [settings.raw_bucket, *settings.stage_config.source_buckets]
    for field, uri, buckets in (  # a corpus named by no URI is the raw bucket's root (readable)
        *((f"{where}.s3_uri", source.s3_uri, readable) for where, source in corpus_sources(settings, inp)),
        ("dataset.tokenizer_s3_uri", inp.dataset.tokenizer_s3_uri, [*readable, settings.datasets_bucket]),
    ):
        if uri is not None and split_uri(uri)[0] not in buckets:
            raise ConfigError(
                field,
                uri,
                f"a URI in a bucket the stack may read: {', '.join(buckets)} (list others in the stage's "
                "source_buckets and deploy)",
            )


def check_corpus_readable(settings: StackSettings, first_files: dict[str, str], store: ObjectStore) -> None:
    """Raises ConfigError when the first file of a corpus source (field -> URI) cannot be read, or is encrypted
    with a KMS key the jobs' role may not use (the stack's key and ``source_bucket_keys`` only): the processing
    job would fail on it after its instances were paid for."""
    keys = [settings.kms_key_arn, *settings.stage_config.source_bucket_keys]
    for field, uri in first_files.items():
        try:
            key = store.encryption_key(uri)
        except PermissionError as error:
            raise ConfigError.sentence(
                field,
                f"the Plan step could not read {uri} ({error}): a bucket of another account must admit the stack's "
                "roles in its policy, and objects encrypted with a KMS key of their own need that key in the stage's "
                "source_bucket_keys (its key policy admitting the roles)",
            ) from error
        if key is not None and key not in keys:
            raise ConfigError.sentence(
                field,
                f"{uri} is encrypted with the KMS key {key}, which the jobs' role may not use: add it to the "
                "stage's source_bucket_keys (its key policy admitting the stack's roles) and deploy",
            )


MAX_TOKENIZER_BYTES = 64 << 20  # a 50,257-token BPE's tokenizer.json is about 2 MB


def check_given_tokenizer(inp: WorkflowInput, store: ObjectStore) -> None:
    """Raises ConfigError when ``dataset.tokenizer_s3_uri`` names no file (the shards job would fail after the
    tokenizer step's instances were paid for), or one with more ids than a given ``hyperparameters.vocab_size``
    (train.py would refuse it at its start, after preprocessing)."""
    uri = inp.dataset.tokenizer_s3_uri
    if uri is None:
        return
    found = store.list(_tokenizer_file(uri))
    if not found:
        raise ConfigError(
            "dataset.tokenizer_s3_uri", uri, f"an existing tokenizer.json ({_tokenizer_file(uri)} does not exist)"
        )
    if not inp.hyperparameters.get("vocab_size"):  # the model takes the tokenizer's vocabulary
        return
    if found[0][1] > MAX_TOKENIZER_BYTES:
        raise ConfigError(
            "dataset.tokenizer_s3_uri", uri, f"a tokenizer.json of at most {MAX_TOKENIZER_BYTES >> 20} MiB"
        )
    ids = tokenizer_ids(store.read_bytes(found[0][0]))
    if ids is None:
        raise ConfigError("dataset.tokenizer_s3_uri", uri, "a tokenizer.json (the tokenizers library's JSON)")
    if inp.vocab_size < ids:
        raise ConfigError(
            "hyperparameters.vocab_size",
            inp.vocab_size,
            f"0 or at least the {ids:,} ids of the given tokenizer ({uri}): its ids index the embedding",
        )


def tokenizer_ids(data: bytes) -> int | None:
    """How many ids a tokenizer.json's vocabulary and added tokens span (the largest id + 1); None when it is not
    one."""
    try:
        body = json.loads(data)
        vocab = body["model"]["vocab"]
        ids = [
            *(vocab.values() if isinstance(vocab, dict) else range(len(vocab))),
            *(t["id"] for t in body.get("added_tokens") or []),
        ]
    except (ValueError, RecursionError, KeyError, TypeError, AttributeError):
        return None
    if not ids or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
        return None
    return max(ids) + 1


def dataset_source(settings: StackSettings, inp: WorkflowInput) -> dict[str, Any]:
    """The fields, other than the tokenizer and the sequence length, that decide which text a dataset holds (a mix's
    weights do not: they choose among its sequences in training)."""
    split = {"preprocessing.validation_fraction": inp.preprocessing.validation_fraction}
    if inp.corpus.sources:
        described = (
            f"{s.name} {s.s3_uri} {inp.corpus.text_field_of(s)} {','.join(sorted(set(comma_names(s.pile_set_names))))}"
            for s in sorted(inp.corpus.sources, key=lambda s: s.name)
        )
        return {"corpus.sources": "; ".join(described), **split}
    return {
        "corpus.s3_uri": requests.corpus_uri(settings, inp),
        "corpus.pile_set_names": ",".join(sorted(set(inp.corpus.pile_sets()))),
        "corpus.text_field": inp.corpus.text_field,
        **split,
    }


def source_record_uri(settings: StackSettings, inp: WorkflowInput) -> str:
    """Where the Plan step records ``dataset_source`` of the dataset it plans to make (under inputs/, which the
    Plan function may write)."""
    return f"s3://{settings.datasets_bucket}/inputs/datasets/{inp.dataset.name}/source.json"


def check_reuse(settings: StackSettings, inp: WorkflowInput, store: ObjectStore, manifests: list[str]) -> None:
    """Raises ConfigError naming each field where the existing dataset differs from the request."""
    made = json.loads(store.read_bytes(manifests[0]))
    wanted: dict[str, Any] = {"training.sequence_length": inp.training.sequence_length}
    found: dict[str, Any] = {"training.sequence_length": made["sequence_length"]}
    record_uri = source_record_uri(settings, inp)
    recorded = json.loads(store.read_bytes(record_uri)) if store.list(record_uri) else {}
    for field, value in dataset_source(settings, inp).items():
        if field.startswith("corpus.") and inp.corpus.s3_uri is None and not inp.corpus.sources:
            continue  # no corpus named: reuse the dataset by its name
        found[field] = recorded.get(field, "text" if field == "corpus.text_field" else "not recorded")  # before it
        wanted[field] = value
    if inp.dataset.tokenizer_s3_uri is None:  # a given tokenizer brings its own vocabulary
        wanted["preprocessing.vocab_size"], found["preprocessing.vocab_size"] = (
            inp.preprocessing.vocab_size,
            made["vocab_size"],
        )
    tokenizer = _tokenizer_file(requests.tokenizer_dir_uri(settings, inp))
    if store.list(tokenizer):
        wanted["dataset.tokenizer_s3_uri"] = hashlib.sha256(store.read_bytes(tokenizer)).hexdigest()
        found["dataset.tokenizer_s3_uri"] = made["tokenizer_sha256"]
    differ = [f"{field} {wanted[field]} (dataset: {found[field]})" for field in wanted if wanted[field] != found[field]]
    if differ:
        raise ConfigError(
            "dataset.name",
            inp.dataset.name,
            f"a dataset made for this request; {requests.dataset_uri(settings, inp)} differs in "
            f"{'; '.join(differ)}: use another dataset.name, or force_preprocess to make it anew",
        )


def _tokenizer_file(uri: str) -> str:
    """A tokenizer URI as the shards job reads it: the file, or ``tokenizer.json`` under a prefix."""
    return uri if uri.endswith(".json") else uri.rstrip("/") + "/tokenizer.json"
