"""python -m cli validate: the Plan step's checks offline, every error at once (no AWS at all)."""

from __future__ import annotations

import json

import pytest

from cli.__main__ import main


def test_every_error_of_an_input_is_reported_at_once(tmp_path, capsys):
    bad = {
        "corpus": {"s3_uri": "s3://my-raw/pile/"},
        "training": {"instance_count": 0, "precison": "bf16", "model_preset": "gpt2-small"},
        "preprocessing": {"vocab_size": 10},
        "hyperparameters": {"lerning_rate": 1e-3},
        "run_name": "bad name",
    }
    (tmp_path / "in.json").write_text(json.dumps(bad))
    assert main(["validate", "--stage", "dev", "--input", str(tmp_path / "in.json")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[1].strip() for line in err[:-1]] == [
        "training.precison",
        "run_name",
        "hyperparameters.lerning_rate",
        "preprocessing.vocab_size",
        "training.model_preset",
        "training.instance_count",
    ]
    assert "(did you mean 'gpt3-125m'?)" in err[4]
    assert err[-1] == f"6 error(s) in {tmp_path / 'in.json'}; the Plan step would refuse it"


def test_every_error_of_a_mix_is_reported_at_once_by_its_index(tmp_path, capsys):
    sources = [
        {"name": "web", "s3_uri": "s3://my-raw/fineweb/", "weight": 0},
        {"name": "code", "s3_uri": "s3://my-raw/code/", "weight": 1, "text_field": ""},
    ]
    (tmp_path / "mix.json").write_text(json.dumps({"corpus": {"sources": sources}}))
    assert main(["validate", "--stage", "dev", "--input", str(tmp_path / "mix.json")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert [line.split(": ")[1] for line in err[:-1]] == [
        "corpus.sources[0].weight",
        "corpus.sources[1].text_field",
    ]
    sources[0]["weight"] = 3
    del sources[1]["text_field"]
    (tmp_path / "mix.json").write_text(json.dumps({"corpus": {"sources": sources}}))
    assert main(["validate", "--stage", "dev", "--input", str(tmp_path / "mix.json")]) == 0
    assert "note: the corpus's bucket my-raw was taken to be the stack's raw bucket" in capsys.readouterr().out


def test_the_estimate_checks_run_too_and_a_valid_input_passes(tmp_path, capsys):
    (tmp_path / "long.json").write_text('{"corpus": {"s3_uri": "s3://raw/p/"}, "training": {"train_tokens": "100B"}}')
    assert main(["validate", "--input", str(tmp_path / "long.json")]) == 1
    assert "error: training.max_run_hours: the run needs about 325 h but training.max_run_hours is 24" in (
        capsys.readouterr().err
    )
    (tmp_path / "ok.json").write_text('{"corpus": {"s3_uri": "s3://raw/p/"}, "training": {"train_tokens": "2B"}}')
    assert main(["validate", "--input", str(tmp_path / "ok.json")]) == 0
    out = capsys.readouterr().out
    assert "valid for stage dev" in out
    assert (
        "\nspeed: modelled 34.5% MFU, " in out and " tokens/s (step " in out
    )  # the plan's, labelled modelled (recompute unset: attention)
    # Someone else's bucket cannot be told from the raw bucket offline: validate says what it assumed.
    assert "note: the corpus's bucket raw was taken to be the stack's raw bucket" in out
    assert "the Plan step refuses it if it is not that bucket and not in the stage's source_buckets" in out


def test_a_bad_tokenizer_source_is_refused_offline(tmp_path, capsys):
    raw = {"corpus": {"s3_uri": "s3://raw/p/"}, "dataset": {"tokenizer_s3_uri": "s3://elsewhere/tok.json"}}
    (tmp_path / "in.json").write_text(json.dumps(raw))
    assert main(["validate", "--input", str(tmp_path / "in.json")]) == 1
    assert "dataset.tokenizer_s3_uri" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"corpus": {"s3_uri": 123}}', "corpus.s3_uri: 123 is not valid; expected a value of type str"),
        (b'{"corpus": {"s3_uri": "gs://bucket/pile/"}}', "corpus.s3_uri: 'gs://bucket/pile/' is not valid"),
        (b'{"training": ' * 100_000 + b"1" + b"}" * 100_000, "nested too deep to read"),
        (b'{"run_name": "caf\xe9"}', "not UTF-8 text (invalid continuation byte at byte 17)"),
        (b'{"hyperparameters": {"seed": ' + b"9" * 5000 + b"}}", "not valid JSON (Exceeds the limit (4300 digits)"),
        (b"{", "not valid JSON (Expecting property name"),
        (
            b'{"run_name": "a", "training": {"spot": true, "spot": false}, "run_name": "b"}',
            "the key 'spot' appears twice in one object (of its keys spot): JSON keeps only the last; give it once",
        ),
        (b'{"a": 1, "b": 2, "a": 3}', "the key 'a' appears twice in one object (of its keys a, b)"),
    ],
    ids=["s3_uri-number", "gs-uri", "deep-nesting", "not-utf8", "5000-digits", "not-json", "key-twice", "top-twice"],
)
def test_what_cannot_be_an_input_is_one_line_not_a_traceback(tmp_path, capsys, content, message):
    (tmp_path / "in.json").write_bytes(content)
    assert main(["validate", "--input", str(tmp_path / "in.json")]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.splitlines()) <= 2


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"corpus": {"sources": [{"name": n, "s3_uri": f"s3://raw/{n}/", "weight": 1e308} for n in "ab"]}}, "weight"),
        ({"training": {"instance_count": 10**400}}, "training.instance_count"),
        ({"preprocessing": {"validation_fraction": 1e-300}}, "preprocessing.validation_fraction"),
        ({"corpus": {"s3_uri": "s3://raw/p/", "text_field": "--mode=tokenizer"}}, "corpus.text_field"),
        ({"corpus": {"s3_uri": "s3://raw/p/", "text_field": "te\u200bxt"}}, "corpus.text_field"),
        ({"corpus": {"s3_uri": "s3://raw/p/", "tokenizer_sample_bytes": "0"}}, "corpus.tokenizer_sample_bytes"),
        ({"corpus": {"s3_uri": "s3://raw/p/"}, "hyperparameters": {"source_weights": "web=1"}}, "hyperparameters"),
    ],
    ids=["weights-1e308", "400-digits", "fraction-1e-300", "option-as-field", "zero-width", "zero-bytes", "weights"],
)
def test_validate_names_the_field_where_it_said_not_an_error_it_explains(tmp_path, capsys, raw, field):
    """Issue 50, items 3, 5, 6, 8: each is one line naming the field (1e308 + 1e308 was an OverflowError)."""
    (tmp_path / "in.json").write_text(json.dumps(raw))
    assert main(["validate", "--input", str(tmp_path / "in.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and field in err.splitlines()[0], err
    assert "not an error this command explains" not in err and "Traceback" not in err
