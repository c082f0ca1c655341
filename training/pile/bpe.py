"""The byte-level BPE tokenizer: training it, loading it, and the settings every encoder uses."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
from data.token_shards import END_OF_TEXT
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

MIN_VOCAB_SIZE = 257  # 256 byte symbols and end-of-text


def train_bpe(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """A GPT-2 style byte-level BPE tokenizer trained on ``texts``, with ``<|endoftext|>`` as id 0.

    The vocabulary can come out smaller than ``vocab_size`` when the texts allow no more merges.
    """
    if vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(f"vocab_size must be at least {MIN_VOCAB_SIZE} (256 bytes and end-of-text), got {vocab_size}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def eot_id(tokenizer: Tokenizer) -> int:
    """The id of ``<|endoftext|>``; raises ValueError for a tokenizer without it."""
    token_id = tokenizer.token_to_id(END_OF_TEXT)
    if token_id is None:
        raise ValueError(f"the tokenizer has no {END_OF_TEXT} token")
    return token_id


def encoder_from_json(tokenizer_json: str) -> Tokenizer:
    """The tokenizer as documents are encoded with it.

    ``encode_special_tokens`` makes a literal ``<|endoftext|>`` inside a document encode as plain text, so the
    end-of-text id only ever marks a document boundary.
    """
    tokenizer = Tokenizer.from_str(tokenizer_json)
    tokenizer.encode_special_tokens = True
    return tokenizer


def tokenizer_file(path: str | Path) -> Path:
    """``path`` itself when it is a file, else ``path/tokenizer.json``; raises FileNotFoundError if missing."""
    candidate = Path(path)
    if candidate.is_dir():
        candidate = candidate / "tokenizer.json"
    if not candidate.is_file():
        raise FileNotFoundError(f"no tokenizer at {candidate}: run `preprocess.py tokenizer` first and pass its output")
    return candidate


def token_byte_lengths(tokenizer: Tokenizer, size: int) -> np.ndarray:
    """The UTF-8 bytes each id of ``range(size)`` decodes to, for bits per byte: a byte-level token's symbols
    are one byte each; special tokens (``<|endoftext|>``) and ids past the tokenizer's (padded rows) are 0.

    Example::

        lengths = token_byte_lengths(tokenizer, 50304)  # lengths[tokenizer.token_to_id("Ġthe")] == 4
    """
    alphabet = set(pre_tokenizers.ByteLevel.alphabet())
    special = set(tokenizer.get_added_tokens_decoder())
    lengths = np.zeros(size, dtype=np.int32)
    for token_id in range(min(size, tokenizer.get_vocab_size())):
        token = tokenizer.id_to_token(token_id)
        if token is None or token_id in special:
            continue
        if not set(token) <= alphabet:
            raise ValueError(f"token {token_id} ({token!r}) is not byte-level BPE: its bytes are not its symbols")
        lengths[token_id] = len(token)
    return lengths
