import argparse
import re

import pytest

from contract.sizes import SIZE, parse_size


def test_sizes_are_binary_multiples_with_an_optional_b():
    sizes = ("1024", "1K", "1.5M", "1GiB", "2gb", " 3 T ")
    assert [parse_size(s) for s in sizes] == [1024, 1024, 3 << 19, 1 << 30, 2 << 30, 3 << 40]


@pytest.mark.parametrize("text", ["lots", "G", "-1G", "1 TB x", "1e9", ""])
def test_what_is_not_a_size_is_refused_by_the_parser_and_the_pattern(text: str):
    with pytest.raises(argparse.ArgumentTypeError, match="not a size"):
        parse_size(text)
    assert re.fullmatch(SIZE, text) is None
