import re

import pytest
from tokenizers import Tokenizer, models

from pile.bpe import encoder_from_json, eot_id, token_byte_lengths, tokenizer_file, train_bpe


def test_trained_tokenizer_has_the_vocabulary_and_end_of_text_first(tokenizer_json):
    tokenizer = Tokenizer.from_str(tokenizer_json)
    assert tokenizer.get_vocab_size() == 400
    assert eot_id(tokenizer) == 0


def test_encoding_round_trips_any_text_and_a_literal_end_of_text_is_plain_text(tokenizer_json):
    encoder = encoder_from_json(tokenizer_json)
    text = "def f(x):\n    return x  # ünïcode ✓ 🚀 <|endoftext|> end\n"
    ids = encoder.encode(text, add_special_tokens=False).ids
    assert eot_id(encoder) not in ids
    assert encoder.decode(ids) == text
    assert len(ids) < len(text.encode())  # merges were learned


def test_small_vocabulary_is_refused():
    with pytest.raises(ValueError, match="at least 257"):
        train_bpe(["text"], vocab_size=100)


def test_a_tokenizer_without_end_of_text_is_refused(tokenizer_json):
    plain = Tokenizer.from_str(tokenizer_json)
    vocab = plain.get_vocab()
    del vocab["<|endoftext|>"]
    with pytest.raises(ValueError, match=re.escape("has no <|endoftext|> token")):
        eot_id(Tokenizer(models.BPE(vocab=vocab, merges=[])))


def test_tokenizer_file_accepts_a_folder_or_a_file(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    assert tokenizer_file(tmp_path) == tmp_path / "tokenizer.json"
    assert tokenizer_file(tmp_path / "tokenizer.json") == tmp_path / "tokenizer.json"
    with pytest.raises(FileNotFoundError, match=re.escape("preprocess.py tokenizer")):
        tokenizer_file(tmp_path / "missing")


def test_token_byte_lengths_add_up_to_the_texts_utf8_bytes(tokenizer_json):
    encoder = encoder_from_json(tokenizer_json)
    lengths = token_byte_lengths(encoder, 512)  # padded past the tokenizer's 400 ids
    for text in ("def f(x):\n    return x  # ünïcode ✓ 🚀 end\n", "日本語のテキスト", "plain ascii"):
        ids = encoder.encode(text, add_special_tokens=False).ids
        assert int(lengths[ids].sum()) == len(text.encode("utf-8"))
    assert lengths[eot_id(encoder)] == 0 and not lengths[400:].any() and lengths[1:400].min() >= 1


def test_token_byte_lengths_refuse_a_tokenizer_that_is_not_byte_level():
    tokenizer = Tokenizer(models.WordLevel({"<|endoftext|>": 0, "héllo wörld": 1}, unk_token="<|endoftext|>"))
    with pytest.raises(ValueError, match=r"token 1 \('héllo wörld'\) is not byte-level BPE"):
        token_byte_lengths(tokenizer, 2)
