"""Sizes in bytes as preprocess.py's arguments take them (``--sample_bytes 2G``): the one pattern, which the Plan
step checks an execution input's ``corpus.tokenizer_sample_bytes`` with before the job starts.

Standard library only: infra loads this file (``infra/training_code.py``).

Example:
    >>> parse_size("1.5M")
    1572864
"""

from __future__ import annotations

import argparse
import re

SIZE = r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*"  # bytes, binary multiples: 6M, 1.5G, 2GiB


def parse_size(text: str) -> int:
    """Bytes from ``1073741824``, ``512M``, ``1G``, ``1GiB`` (binary multiples)."""
    match = re.fullmatch(SIZE, text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (examples: 1073741824, 512M, 1G)")
    number, unit = match.groups()
    return int(float(number) * 1024 ** " KMGT".index(unit.upper() or " "))
