"""A mix of sources in the Plan step: the jobs' inputs and arguments, the weights for training, the plan's words,
the reuse record, and each refusal naming its field."""

from __future__ import annotations

import json
import re

import pytest

from infra.aws_limits import aws_limits
from infra.plan_step.execution_input import MAX_SOURCES
from infra.plan_step.metric_definitions import METRIC_DEFINITIONS, SOURCE_TOKEN
from infra.plan_step.mix import mix_line
from infra.plan_step.plan import InputError, plan_execution
from local.folder_store import FolderStore

WEB = {"name": "web", "s3_uri": "s3://raw-bucket/fineweb/", "weight": 3}
CODE = {"name": "code-2", "s3_uri": "s3://raw-bucket/code/", "weight": 1, "text_field": "content",
        "pile_set_names": "Github, StackExchange"}  # fmt: skip


@pytest.fixture
def store(tmp_path) -> FolderStore:
    store = FolderStore(tmp_path)
    for i in range(3):
        store.put_text(f"s3://raw-bucket/fineweb/{i:03d}.parquet", "x" * 4_000)  # ~3,000 tokens estimated each
    store.put_text("s3://raw-bucket/code/a.jsonl", "y" * 400)  # ~100 tokens estimated
    return store


def mix_input(**corpus) -> dict:
    return {"corpus": {"sources": [WEB, CODE], **corpus}, "training": {"train_tokens": 1_000_000}}


def test_each_source_is_an_input_of_its_own_with_its_weight_field_and_subsets(settings, store):
    plan = plan_execution(mix_input(), "exec-1", settings, store)
    shards = plan["requests"]["shards"]
    raw = {i["InputName"]: i["S3Input"] for i in shards["ProcessingInputs"] if i["InputName"].startswith("raw")}
    assert {name: (s["S3Uri"], s["LocalPath"], s["S3DataDistributionType"]) for name, s in raw.items()} == {
        "raw-web": ("s3://raw-bucket/fineweb/", "/opt/ml/processing/input/raw/web", "ShardedByS3Key"),
        "raw-code-2": ("s3://raw-bucket/code/", "/opt/ml/processing/input/raw/code-2", "ShardedByS3Key"),
    }
    arguments = shards["AppSpecification"]["ContainerArguments"]
    assert arguments[arguments.index("--text_field") :] == [
        "--text_field", "text", "--source=web:3.0", "--source=code-2:1.0", "--source_text_field=code-2:content",
        "--source_pile_set_names=code-2:Github", "--source_pile_set_names=code-2:StackExchange",
    ]  # fmt: skip
    tokenizer = plan["requests"]["tokenizer"]
    manifests = {i["InputName"]: i["S3Input"] for i in tokenizer["ProcessingInputs"] if i["InputName"] != "code"}
    assert {s["S3DataType"] for s in manifests.values()} == {"ManifestFile"}
    assert json.loads(store.path(manifests["raw-code-2"]["S3Uri"]).read_text()) == [
        {"prefix": "s3://raw-bucket/code/"},
        "a.jsonl",
    ]
    assert tokenizer["AppSpecification"]["ContainerArguments"][-6:] == arguments[-6:]


def test_training_gets_the_weights_and_a_metric_a_source(settings, store):
    plan = plan_execution(mix_input(), "exec-1", settings, store)
    training = plan["requests"]["training"]
    assert training["HyperParameters"]["source_weights"] == '"code-2=1.0,web=3.0"'
    added = training["AlgorithmSpecification"]["MetricDefinitions"][len(METRIC_DEFINITIONS) :]
    assert [d["Name"] for d in added] == [
        "validation:source_bits_per_byte:web",
        "validation:source_bits_per_byte:code-2",
    ]
    tokens = {token for d in METRIC_DEFINITIONS for token in re.split(r"[^a-z0-9]+", d["Name"])}
    assert SOURCE_TOKEN not in tokens  # the dashboard's search for every source's finds no other metric
    line = "[valid] step=9 val_bpb=1.1 val_bpb_se=0.1 val_loss_code_2=4.2 val_bpb_code_2=1.3 val_bpb_se_code_2=0.2"
    assert re.search(added[1]["Regex"], line).group(1) == "1.3"
    assert MAX_SOURCES + len(METRIC_DEFINITIONS) <= aws_limits().metric_definitions


def test_the_plan_states_each_share_its_tokens_and_epochs(settings, store):
    plan = plan_execution(mix_input(), "exec-1", settings, store)
    rows = {row["name"]: row for row in plan["summary"]["mix_sources"]}
    # web: 3 Parquet files of 4,000 bytes x 3 text bytes a byte / 4 bytes a token = 9,000 tokens, 75% of 1 M
    assert rows["web"] == {"name": "web", "share": 0.75, "tokens": 9_000, "tokens_are": "estimated",
                           "train_tokens": 750_000, "epochs": 83.333}  # fmt: skip
    assert rows["code-2"]["tokens"] == 100 and rows["code-2"]["epochs"] == 2_500.0  # plain .jsonl: 1 byte a byte
    assert plan["summary"]["mix"].startswith("web 75% = 0.8 M (0.0 M tokens estimated: 83.33 epochs, repeats); ")
    assert mix_line([]) == "one source (no mix)"


def test_the_weights_do_not_decide_reuse_but_the_sources_do(settings, store):
    plan_execution(mix_input(), "exec-1", settings, store)
    store.put_text(
        "s3://datasets-bucket/datasets/pile/manifests/algo-1.json",
        json.dumps({"sequence_length": 2048, "vocab_size": 50257, "tokenizer_sha256": "x",
                    "sources": {"web": {"train_tokens": 600}, "code-2": {"train_tokens": 40}}}),
    )  # fmt: skip
    reweighted = mix_input()
    reweighted["corpus"]["sources"] = [{**WEB, "weight": 1}, CODE]
    plan = plan_execution(reweighted, "exec-2", settings, store)
    assert plan["preprocess"]["run"] is False
    assert {row["name"]: row["tokens"] for row in plan["summary"]["mix_sources"]} == {"web": 600, "code-2": 40}
    assert plan["summary"]["mix_sources"][0]["tokens_are"] == "counted"
    moved = mix_input()
    moved["corpus"]["sources"] = [{**WEB, "s3_uri": "s3://raw-bucket/fineweb-edu/"}, CODE]
    with pytest.raises(InputError, match=r"^dataset\.name: .* differs in corpus\.sources .*fineweb-edu"):
        plan_execution(moved, "exec-3", settings, store)


def test_a_datasets_tokens_are_summed_over_every_hosts_manifest_part(settings, store):
    """Preprocessing on several hosts writes a manifest part each; a source's tokens are the sum of its parts."""
    plan_execution(mix_input(), "exec-1", settings, store)
    parts = {"algo-1": {"web": 600, "code-2": 40}, "algo-2": {"web": 250}, "algo-3": {"web": 1, "code-2": 9}}
    for host, sources in parts.items():
        store.put_text(
            f"s3://datasets-bucket/datasets/pile/manifests/{host}.json",
            json.dumps({"sequence_length": 2048, "vocab_size": 50257, "tokenizer_sha256": "x",
                        "sources": {name: {"train_tokens": n} for name, n in sources.items()}}),
        )  # fmt: skip
    plan = plan_execution(mix_input(), "exec-2", settings, store)
    assert plan["preprocess"]["run"] is False
    assert {row["name"]: row["tokens"] for row in plan["summary"]["mix_sources"]} == {"web": 851, "code-2": 49}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"s3_uri": "s3://raw-bucket/pile/"}, r"^corpus\.s3_uri: .* expected none with corpus\.sources"),
        ({"pile_set_names": "Github"}, r"^corpus\.pile_set_names: .* expected none with corpus\.sources"),
        ({"sources": [WEB, {**CODE, "name": "web"}]}, r"^corpus\.sources\[1\]\.name: 'web' .* no other source"),
        ({"sources": [{**WEB, "name": "Web"}]}, r"^corpus\.sources\[0\]\.name: 'Web' is not valid"),
        ({"sources": [{**WEB, "name": "se-x"}]}, r"^corpus\.sources\[0\]\.name: 'se-x' is not valid"),
        ({"sources": [{**WEB, "weight": 0}]}, r"^corpus\.sources\[0\]\.weight: 0\.0 .* positive finite"),
        ({"sources": [{**WEB, "weight": float("inf")}]}, r"^corpus\.sources\[0\]\.weight: .* finite number"),
        ({"sources": [WEB, {**CODE, "weight": 1e-5}]}, r"^corpus\.sources\[1\]\.weight: .* 1 / 65,536"),
        ({"sources": [{**WEB, "weight": "3"}]}, r"^corpus\.sources\[0\]\.weight: '3' .* float"),
        ({"sources": [{"name": "web", "weight": 1}]}, r"^corpus\.sources\[0\]\.s3_uri: None .* required"),
        ({"sources": [{**WEB, "s3_uri": "/etc/passwd"}]}, r"^corpus\.sources\[0\]\.s3_uri: .* s3://bucket/prefix"),
        ({"sources": [{**WEB, "s3_uri": "s3://other-bucket/x/"}]}, r"^corpus\.sources\[0\]\.s3_uri: .* may read"),
        ({"sources": [{**WEB, "s3_uri": "s3://raw-bucket/empty/"}]}, r"^corpus\.sources\[0\]\.s3_uri: no .* files"),
        ({"sources": [{**WEB, "colour": "red"}]}, r"^corpus\.sources\[0\]\.colour: .* a known field"),
        ({"sources": [{**WEB, "text_field": ""}]}, r"^corpus\.sources\[0\]\.text_field: '' .* printable"),
        ({"sources": "web"}, r"^corpus\.sources: 'web' .* a JSON array of objects"),
        ({"sources": [{**WEB, "name": f"s{i}"} for i in range(MAX_SOURCES + 1)]}, r"^corpus\.sources: .* at most 8"),
        ({"sources": [{**WEB, "pile_set_names": ",".join(f"n{i}" for i in range(65))}]}, r"at most 64 in all"),
        ({"sources": [{**WEB, "pile_set_names": "x" * 250}]}, r"^corpus\.sources\[0\]\.pile_set_names: .* at most 228"),
    ],
)
def test_a_bad_mix_is_refused_naming_the_field(settings, store, change, message):
    with pytest.raises(InputError, match=message):
        plan_execution(mix_input(**change), "exec-1", settings, store)


def test_instances_are_bounded_by_the_largest_source(settings, store):
    raw = {**mix_input(), "preprocessing": {"instance_count": 3}}
    assert plan_execution(raw, "exec-1", settings, store)["requests"]["shards"]["ProcessingResources"]
    raw["preprocessing"]["instance_count"] = 4
    with pytest.raises(InputError, match=r"expected at most 3, the number of corpus files of its largest source"):
        plan_execution(raw, "exec-1", settings, store)


def test_the_workflow_owns_the_weights_of_a_mix(settings, store):
    raw = {**mix_input(), "hyperparameters": {"source_weights": "web=1,code-2=1"}}
    with pytest.raises(
        InputError,
        match=r"^hyperparameters\.source_weights: .* corpus\.sources' weights instead \(the workflow sets it\)",
    ):
        plan_execution(raw, "exec-1", settings, store)
