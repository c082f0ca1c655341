"""Fixtures shared by the pile tests: a small corpus and a tokenizer trained on it once per session."""

import pytest

from pile.bpe import train_bpe
from pile.sample_corpus import stdlib_documents


@pytest.fixture(scope="session")
def corpus() -> list[str]:
    return stdlib_documents(300_000, max_document_bytes=8_000)


@pytest.fixture(scope="session")
def tokenizer_json(corpus) -> str:
    return train_bpe(corpus, vocab_size=400).to_str()
