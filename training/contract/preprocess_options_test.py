import argparse
from pathlib import Path

import pytest

from contract import formats, hparams, sizes
from contract.preprocess_options import add_options, container_arguments, options

TABLE = options(formats, hparams, sizes)
# Each option: what the Plan step may give, and what preprocess.py reads from its arguments.
GIVEN_AND_READ = {
    "input_dir": ("/opt/ml/processing/input/raw", Path("/opt/ml/processing/input/raw")),
    "text_field": ("body", "body"),
    "tokenizer_dir": ("/t", Path("/t")),
    "output_dir": ("/o", Path("/o")),
    "vocab_size": (500, 500),
    "sample_bytes": ("2GiB", 2 << 30),
    "sequence_length": (64, 64),
    "shard_size_mb": (0.5, 0.5),
    "validation_fraction": (0.1, 0.1),
    "pile_set_names": (["Gutenberg (PG-19)", "ArXiv"], {"Gutenberg (PG-19)", "ArXiv"}),
    "source": ([("web", 0.7), ("code", 3)], [("web", 0.7), ("code", 3.0)]),
    "source_text_field": ([("code", "content")], [("code", "content")]),
    "source_pile_set_names": ([("web", "Gutenberg (PG-19)")], [("web", "Gutenberg (PG-19)")]),
    "workers": (3, 3),
    "host": ("algo-2", "algo-2"),
    "progress_seconds": (0.0, 0.0),
}


def parse(arguments: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    add_options(parser, TABLE)
    return parser.parse_args(arguments)


@pytest.mark.parametrize("name", TABLE)
def test_each_option_parses_back_to_the_value_given(name):
    given, read = GIVEN_AND_READ[name]
    mode = TABLE[name].modes[0]
    args = parse(container_arguments(TABLE, mode, {name: given}))
    assert (args.mode, getattr(args, name)) == (mode, read)


def test_repeatable_options_go_one_argument_a_value_the_others_as_name_and_value():
    values = {"vocab_size": 500, "pile_set_names": ["ArXiv", "Gutenberg (PG-19)"], "source": [("web", 0.7)]}
    assert container_arguments(TABLE, "tokenizer", values) == [
        "tokenizer", "--vocab_size", "500", "--pile_set_names=ArXiv", "--pile_set_names=Gutenberg (PG-19)",
        "--source=web:0.7",
    ]  # fmt: skip


def test_defaults_are_what_an_absent_option_reads():
    args = parse(["shards"])
    assert all(getattr(args, name) == option.default for name, option in TABLE.items())
    assert args.text_field == formats.DEFAULT_TEXT_FIELD and args.sample_bytes == 10**9


@pytest.mark.parametrize(
    ("mode", "values", "message"),
    [
        ("tokenizer", {"vocab": 500}, "--vocab: preprocess.py has no such option"),
        ("tokenizer", {"sequence_length": 64}, "--sequence_length: preprocess.py tokenizer does not read it"),
        ("shards", {"vocab_size": 500}, "--vocab_size: preprocess.py shards does not read it"),
        ("tokenizer", {"vocab_size": 0}, "--vocab_size '0': must be at least 1: 0"),
        ("tokenizer", {"sample_bytes": "lots"}, "--sample_bytes 'lots': an amount such as 1024"),
        ("tokenizer", {"sample_bytes": "0"}, "--sample_bytes '0': an amount such as"),
        (
            "shards",
            {"text_field": "--mode=tokenizer"},
            "--text_field '--mode=tokenizer': a field name of 1 to 128 printable characters, not starting with '-'",
        ),
        ("shards", {"text_field": "te\u200bxt"}, "--text_field 'te\\u200bxt': a field name of"),
        ("shards", {"pile_set_names": ["Githuб"]}, "--pile_set_names 'Githuб': a Pile subset name of printable ASCII"),
        ("shards", {"pile_set_names": ["a\x00"]}, "--pile_set_names 'a\\x00': a Pile subset name"),
        ("shards", {"validation_fraction": 1}, "--validation_fraction '1': must be in [0, 1)"),
        ("shards", {"source": [("Web", 1)]}, "--source 'Web:1': source name 'Web'"),
        ("shards", {"host": "a--b"}, "--host 'a--b': host must be"),
        ("compile", {}, "mode 'compile': one of tokenizer, shards"),
    ],
)
def test_an_unknown_option_or_a_refused_value_fails_before_the_job(mode, values, message):
    with pytest.raises(ValueError) as refused:
        container_arguments(TABLE, mode, values)
    assert str(refused.value).startswith(message), refused.value
