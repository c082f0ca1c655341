"""Preparing a training job: every check that can fail before compute, then the engine, model and data.

Checks, in order, each a clear ``JobError`` before any TensorFlow work:
    the train channel (and validation, when evaluating) exists and holds sequences
    the tokenizer matches the manifest's vocabulary, and the model's vocabulary holds it
    the sequence length fits in the shards' records
    source_weights names every source of the train split and no other
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING

from contract.hparams import source_weights
from data.source_mix import check_weights
from tokenizers import Tokenizer

if TYPE_CHECKING:  # data.channel imports TensorFlow, which train.py imports only after its XLA flags are set
    from data.channel import Channel


class JobError(ValueError):
    """A configuration that cannot train; raised before compute is spent."""


@dataclasses.dataclass
class Inputs:
    """What the checks established about the data."""

    train: Channel
    validation: Channel | None
    tokenizer: Tokenizer
    vocab_size: int
    sequence_length: int


def check_inputs(args) -> Inputs:
    """Channels, tokenizer, vocabulary and sequence length (no TensorFlow work)."""
    from data.channel import open_channel

    train = open_channel(args.train_dir, "train")
    if args.source_weights:
        try:
            check_weights(source_weights(args.source_weights), train.sources)
        except ValueError as error:
            raise JobError(str(error)) from None
    validation = None
    if args.eval_every > 0:
        validation = open_channel(args.validation_dir or train.root, "validation")
        if validation.manifest.tokenizer_sha256 != train.manifest.tokenizer_sha256:
            raise JobError("the train and validation channels were encoded with different tokenizers")
    tokenizer = Tokenizer.from_file(str(train.tokenizer_path))
    tokenizer_vocab = tokenizer.get_vocab_size()
    if tokenizer_vocab != train.manifest.vocab_size:
        raise JobError(
            f"vocabulary mismatch: tokenizer.json has {tokenizer_vocab} ids, the manifest says "
            f"{train.manifest.vocab_size}"
        )
    vocab_size = args.vocab_size or tokenizer_vocab
    if vocab_size < tokenizer_vocab:
        raise JobError(
            f"vocabulary mismatch: vocab_size {vocab_size} is smaller than the tokenizer's "
            f"{tokenizer_vocab} ids; token ids up to {tokenizer_vocab - 1} would index past the embedding"
        )
    sequence_length = args.sequence_length or train.manifest.sequence_length
    for channel in filter(None, (train, validation)):
        if sequence_length > channel.manifest.sequence_length:
            raise JobError(
                f"sequence_length {sequence_length} is longer than the {channel.split} shards' "
                f"{channel.manifest.sequence_length} tokens: preprocess with a longer sequence_length"
            )
    return Inputs(train, validation, tokenizer, vocab_size, sequence_length)


def cluster(env=os.environ) -> tuple[list[str], str, int | None]:
    """(SM_HOSTS, SM_CURRENT_HOST, SM_NUM_GPUS) with single-machine defaults."""
    hosts = json.loads(env.get("SM_HOSTS") or '["localhost"]')
    current = env.get("SM_CURRENT_HOST") or hosts[0]
    gpus = env.get("SM_NUM_GPUS")
    return hosts, current, int(gpus) if gpus not in (None, "") else None
