"""Issue 50: inputs that passed the Plan step and failed a job hours later, or meant something else than written;
each refused by the Plan step in one line naming the field (``cli/validate_test.py``: the same offline)."""

from __future__ import annotations

import json

import pytest
from preprocess import OPTIONS

from infra.plan_step.plan import InputError, plan_execution
from local.folder_store import FolderStore

CORPUS = {"s3_uri": "s3://raw-bucket/pile/"}
WEB = {"name": "web", "s3_uri": "s3://raw-bucket/web/", "weight": 1}


@pytest.fixture
def store(tmp_path) -> FolderStore:
    store = FolderStore(tmp_path)
    for key in ("pile/00.jsonl.zst", "pile/01.jsonl.zst", "pile-old/00.jsonl.zst", "pile.jsonl", "web/0.jsonl"):
        store.put_text(f"s3://raw-bucket/{key}", "x")
    return store


def plan(raw: dict, settings, store) -> dict:
    return plan_execution(raw, "exec-1", settings, store)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        # Item 3: a fraction that picks no validation document fails train.py's evaluation at its start.
        (
            {"preprocessing": {"validation_fraction": 0}},
            "preprocessing.validation_fraction: 0.0 is not valid; expected",
        ),
        ({"preprocessing": {"validation_fraction": 1e-300}}, "validation_fraction: 1e-300 is not valid; expected a"),
        # Item 3: train.py finds no source to weigh without a mix.
        ({"hyperparameters": {"source_weights": "web=1"}}, "hyperparameters.source_weights: 'web=1' is not valid"),
        # Item 5: zero bytes of text trains no tokenizer.
        ({"corpus": {**CORPUS, "tokenizer_sample_bytes": "0"}}, "corpus.tokenizer_sample_bytes: '0' is not valid"),
        # Item 6: the job's own rule for each name.
        ({"corpus": {**CORPUS, "text_field": "--mode=tokenizer"}}, "corpus.text_field: '--mode=tokenizer' is not"),
        ({"corpus": {**CORPUS, "text_field": "-t"}}, "corpus.text_field: '-t' is not valid; expected a field name"),
        ({"corpus": {**CORPUS, "text_field": "te\u200bxt"}}, "corpus.text_field: 'te\\u200bxt' is not valid"),
        ({"corpus": {**CORPUS, "pile_set_names": "Githu\u0431"}}, "corpus.pile_set_names: 'Githuб' is not valid"),
        ({"corpus": {**CORPUS, "pile_set_names": "Github,Pil\u0435-CC"}}, "a Pile subset name of printable ASCII"),
        ({"corpus": {**CORPUS, "pile_set_names": "a\x00b"}}, "corpus.pile_set_names: 'a\\x00b' is not valid"),
        ({"corpus": {"sources": [{**WEB, "text_field": "-x"}]}}, "corpus.sources[0].text_field: '-x' is not valid"),
        (
            {"corpus": {"sources": [{**WEB, "pile_set_names": "Githu\u0431"}]}},
            "corpus.sources[0].pile_set_names: 'Githuб' is not valid; expected a Pile subset name",
        ),
        # Item 7: the same source twice, or one inside another, reads files twice.
        (
            {"corpus": {"sources": [WEB, {**WEB, "name": "web-2"}]}},
            "corpus.sources[1].s3_uri: 's3://raw-bucket/web/' is not valid; expected a folder apart from "
            "corpus.sources[0]'s (s3://raw-bucket/web/)",
        ),
        (
            {"corpus": {"sources": [WEB, {**WEB, "name": "inner", "s3_uri": "s3://raw-bucket/web/inner"}]}},
            "corpus.sources[1].s3_uri: 's3://raw-bucket/web/inner/' is not valid; expected a folder apart",
        ),
        # Item 8: numbers bounded before any arithmetic (1e308 + 1e308 overflowed fsum; 400 digits a float).
        (
            {
                "corpus": {
                    "sources": [
                        {**WEB, "weight": 1e308},
                        {**WEB, "name": "b", "s3_uri": "s3://raw-bucket/b/", "weight": 1e308},
                    ]
                }
            },
            "corpus.sources[0].weight: 1e+308 is not valid; expected a finite number of magnitude at most 1e+18",
        ),
        ({"training": {"instance_count": 10**400}}, "training.instance_count: <an integer of about 400 digits> is"),
        ({"hyperparameters": {"learning_rate": float("nan")}}, "hyperparameters.learning_rate: nan is not valid"),
        ({"deploy": {"instance_count": 10**19}}, "deploy.instance_count: 10000000000000000000 is not valid"),
    ],
)
def test_what_would_fail_later_is_refused_by_the_plan_naming_the_field(settings, store, raw, message):
    with pytest.raises(InputError) as refused:
        plan({"corpus": CORPUS, **raw}, settings, store)
    assert message in str(refused.value) and "\n" not in str(refused.value), refused.value


def test_without_evaluation_no_validation_split_is_needed(settings, store):
    raw = {"corpus": CORPUS, "preprocessing": {"validation_fraction": 0}, "hyperparameters": {"eval_every": 0}}
    assert plan(raw, settings, store)["preprocess"]["run"] is True


def test_a_corpus_uri_names_a_folder_not_every_key_that_starts_alike(settings, store):
    """Item 7: s3://raw-bucket/pile also matched pile-old/ and pile.jsonl (S3 prefixes match by characters)."""
    planned = plan({"corpus": {"s3_uri": "s3://raw-bucket/pile"}}, settings, store)
    raw = [i for i in planned["requests"]["shards"]["ProcessingInputs"] if i["InputName"].startswith("raw")]
    assert [i["S3Input"]["S3Uri"] for i in raw] == ["s3://raw-bucket/pile/"]
    manifest = planned["requests"]["tokenizer"]["ProcessingInputs"][1]["S3Input"]["S3Uri"]
    assert json.loads(store.path(manifest).read_text()) == [
        {"prefix": "s3://raw-bucket/pile/"},
        "00.jsonl.zst",
        "01.jsonl.zst",
    ]
    bucket_root = plan(
        {"corpus": {"s3_uri": "s3://raw-bucket"}, "preprocessing": {"instance_count": 1}}, settings, store
    )
    assert [
        i["S3Input"]["S3Uri"]
        for i in bucket_root["requests"]["shards"]["ProcessingInputs"]
        if i["InputName"].startswith("raw")
    ] == ["s3://raw-bucket/"]


def test_amounts_mean_the_same_in_bytes_and_tokens(settings, store):
    """Item 5: "2B" is two billion in both (it was 2 bytes of tokenizer sample, 2 billion tokens to train on)."""
    raw = {"corpus": {**CORPUS, "tokenizer_sample_bytes": "2B"}, "training": {"train_tokens": "2B"}}
    planned = plan(raw, settings, store)
    arguments = planned["requests"]["tokenizer"]["AppSpecification"]["ContainerArguments"]
    assert OPTIONS["sample_bytes"].check(arguments[arguments.index("--sample_bytes") + 1]) == 2_000_000_000
    assert planned["summary"]["steps"] * 524_288 >= 2_000_000_000


def test_a_vocab_size_below_the_given_tokenizer_s_is_refused(settings, store):
    """Item 3: train.py refused it at its start, after preprocessing."""
    vocab = {f"t{i}": i for i in range(50_256)}
    tokenizer = {"model": {"type": "BPE", "vocab": vocab}, "added_tokens": [{"id": 50_256, "content": "<|endoftext|>"}]}
    store.put_text("s3://raw-bucket/tok/tokenizer.json", json.dumps(tokenizer))
    given = {"corpus": CORPUS, "dataset": {"tokenizer_s3_uri": "s3://raw-bucket/tok/"}}
    with pytest.raises(InputError) as refused:
        plan({**given, "hyperparameters": {"vocab_size": 32_000}}, settings, store)
    assert str(refused.value) == (
        "hyperparameters.vocab_size: 32000 is not valid; expected 0 or at least the 50,257 ids of the given tokenizer "
        "(s3://raw-bucket/tok/): its ids index the embedding"
    )
    assert plan({**given, "hyperparameters": {"vocab_size": 50_304}}, settings, store)["preprocess"]["run"] is True
    store.put_text("s3://raw-bucket/tok/tokenizer.json", "not json")
    with pytest.raises(InputError, match=r"dataset.tokenizer_s3_uri: .* expected a tokenizer.json"):
        plan({**given, "hyperparameters": {"vocab_size": 50_304}}, settings, store)


def test_a_run_name_that_names_another_run_s_checkpoints_is_refused_unless_resumed(settings, store):
    """Item 9: the same run_name continued another run's checkpoints with a warning, or failed at train.py's start
    when its shape differed."""
    run = {"corpus": CORPUS, "run_name": "gpt-pile"}
    plan(run, settings, store)
    assert plan(run, settings, store)["run_name"] == "gpt-pile"  # the same run: resumed
    with pytest.raises(InputError) as refused:
        plan({**run, "training": {"n_layer": 6}, "resume": True}, settings, store)
    assert str(refused.value) == (
        "run_name: 'gpt-pile' is another run's checkpoint folder (s3://checkpoints-bucket/gpt-pile/), which this "
        "execution would resume; it differs in training.n_layer 6 (run: 12): use another run_name"
    )
    other = {**run, "dataset": {"name": "web"}}
    with pytest.raises(InputError, match=r"differs in dataset.name s3://datasets-bucket/datasets/web/ \(run: s3://"):
        plan(other, settings, store)
    assert plan({**other, "resume": True}, settings, store)["checkpoint_uri"] == "s3://checkpoints-bucket/gpt-pile/"
    assert plan({**run, "training": {"n_layer": 6}, "run_name": "gpt-pile-6"}, settings, store)
