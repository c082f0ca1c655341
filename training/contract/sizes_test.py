import argparse

import pytest

from contract.sizes import AmountError, parse_amount


def test_one_grammar_for_bytes_and_tokens_each_suffix_one_meaning():
    """Issue 50, item 5: "2B" was 2 bytes as tokenizer_sample_bytes and 2 billion as train_tokens."""
    amounts = {
        "1024": 1024,
        "4k": 4_000,
        "1.5M": 1_500_000,
        "2B": 2_000_000_000,
        "2G": 2_000_000_000,
        "2gb": 2_000_000_000,
        "500MB": 500_000_000,
        " 3 T ": 3 * 10**12,
        "300e9": 300 * 10**9,
        "524_288": 524_288,
        "1KiB": 1024,
        "1.5MiB": 3 << 19,
        "2GiB": 2 << 30,
        "1tib": 1 << 40,
    }
    assert {text: parse_amount(text) for text in amounts} == amounts


@pytest.mark.parametrize("text", ["0", "0.4", "0G", "lots", "G", "-1G", "1 TB x", "", "2BB", "1Ki", "1e400", "2e18"])
def test_what_is_no_amount_or_none_is_refused_for_argparse_and_the_plan_alike(text: str):
    with pytest.raises(AmountError, match=r"^an amount such as 1024, 500M") as refused:
        parse_amount(text)
    assert isinstance(refused.value, ValueError) and isinstance(refused.value, argparse.ArgumentTypeError)
