"""Amounts as every input and argument takes them, bytes and tokens alike: one grammar, one meaning a suffix.

    number [multiplier] [B]             1024, 1.5M, 300B, 2G, 4k, 300e9, 524_288, 6MiB, 500MB, " 3 T "
    k  thousand (10^3)    M  million (10^6)    G or B  billion (10^9)    T  trillion (10^12)
    KiB MiB GiB TiB       binary multiples (2^10, 2^20, 2^30, 2^40)
    a B after k, M, G or T is the unit, not a billion: 500MB = 500M; after a number alone, a billion: 2B = 2,000,000,000

Letters in any case. An amount is a whole number from 1 to 10^18 (rounded: 1.5k = 1,500); 0 is refused, since
no amount read here (a tokenizer's sample, tokens to train on, a batch) can be none. ``preprocess.py
--sample_bytes``, the execution input's ``corpus.tokenizer_sample_bytes`` and the configuration's
``training.train_tokens`` and ``training.global_batch_tokens`` are read by this one function.

Standard library only: infra loads this file (``infra/training_code.py``).

Example:
    >>> parse_amount("1.5M"), parse_amount("2B"), parse_amount("2GiB")
    (1500000, 2000000000, 2147483648)
"""

from __future__ import annotations

import argparse
import math
import re

AMOUNT = re.compile(r"\s*((?:\d[\d_]*)?\.?\d[\d_]*(?:e\d+)?)\s*(?:([kmgt])(ib|b)?|(b))?\s*", re.IGNORECASE)
DECIMAL = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9, "t": 10**12}
BINARY = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
MAX_AMOUNT = 10**18
AMOUNT_RULE = "an amount such as 1024, 500M, 1.5G, 300B (billions) or 2GiB, from 1 to 1e18"


class AmountError(ValueError, argparse.ArgumentTypeError):
    """Not an amount; the message is what is expected (``AMOUNT_RULE``). A ValueError, and an ArgumentTypeError so
    that argparse prints the message."""


def parse_amount(text: str) -> int:
    """The whole number ``text`` names (see the module's grammar); AmountError for anything else."""
    match = AMOUNT.fullmatch(str(text))
    if not match:
        raise AmountError(AMOUNT_RULE)
    number, letter, unit, billion = match.groups()
    letter = (letter or billion or "").lower()
    scale = BINARY[letter] if (unit or "").lower() == "ib" else DECIMAL[letter]
    value = float(number.replace("_", "")) * scale
    if not (math.isfinite(value) and 1 <= round(value) <= MAX_AMOUNT):
        raise AmountError(AMOUNT_RULE)
    return round(value)
