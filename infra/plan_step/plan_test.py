"""The Plan step against a folder standing in for S3: what it decides, what it refuses, what it writes."""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import time
from dataclasses import replace

import pytest
from preprocess import OPTIONS

from infra.aws_limits import aws_limits
from infra.plan_step.execution_input import MAX_PILE_SET_NAMES, PILE_SET_OPTION
from infra.plan_step.plan import InputError, check_input, plan_execution
from local.folder_store import FolderStore


@pytest.fixture
def store(tmp_path) -> FolderStore:
    store = FolderStore(tmp_path)
    for i in range(5):
        store.put_text(f"s3://raw-bucket/pile/{i:02d}.jsonl.zst", "x" * (i + 1))
    store.put_text("s3://raw-bucket/pile/README.md", "not a corpus file")
    return store


def test_fresh_dataset_runs_every_preprocessing_step(settings, store):
    plan = plan_execution({"corpus": {"s3_uri": "s3://raw-bucket/pile/"}}, "exec-1", settings, store)
    assert plan["preprocess"] == {"run": True, "train_tokenizer": True, "dataset_ready": False}
    assert plan["stage_to_efs"] is True and plan["deploy"] is False
    assert plan["names"]["training"].startswith("gpt-dev-exec-1-")
    assert plan["requests"]["training"]["TrainingJobName"] == plan["names"]["training"]
    assert plan["checkpoint_uri"] == "s3://checkpoints-bucket/exec-1/"
    fit = plan["summary"]["fit"]  # the estimate for gpt3-125m on the dev stage's ml.g5.12xlarge
    assert fit["fits"] is True and fit["capacity_gib"] == 20.06 and fit["marketed_gib"] == 24  # usable, marketed
    assert 0 < fit["memory_gib"]["total"] < 20.06
    assert fit["modelled"].startswith("modelled ") and " MFU, " in fit["modelled"]


def test_tokenizer_sample_is_spread_over_the_corpus(settings, store):
    plan = plan_execution(
        {"corpus": {"s3_uri": "s3://raw-bucket/pile/", "tokenizer_sample_files": 3}}, "exec-1", settings, store
    )
    manifest_uri = plan["requests"]["tokenizer"]["ProcessingInputs"][1]["S3Input"]["S3Uri"]
    manifest = json.loads(store.path(manifest_uri).read_text())
    assert manifest == [{"prefix": "s3://raw-bucket/pile/"}, "00.jsonl.zst", "02.jsonl.zst", "04.jsonl.zst"]


def test_todays_formats_are_the_corpus_and_others_are_named(settings, store):
    for name in ("fineweb/000_00000.parquet", "dclm/shard_00.jsonl.zstd", "dolma/v1-0000.json.gz", "meta.csv"):
        store.put_text(f"s3://raw-bucket/mixed/{name}", "x")
    raw = {
        "corpus": {"s3_uri": "s3://raw-bucket/mixed/", "text_field": "content"},
        "preprocessing": {"instance_count": 3},
    }
    plan = plan_execution(raw, "exec-1", settings, store)  # three readable files for three instances
    assert plan["summary"]["files_unsupported"] == (
        "1 skipped, in no format preprocessing reads: s3://raw-bucket/mixed/meta.csv"
    )
    for job in ("tokenizer", "shards"):
        arguments = plan["requests"][job]["AppSpecification"]["ContainerArguments"]
        assert arguments[arguments.index("--text_field") + 1] == "content"
    default = plan_execution({"corpus": {"s3_uri": "s3://raw-bucket/pile/"}}, "exec-2", settings, store)
    assert default["summary"]["files_unsupported"] == (
        "1 skipped, in no format preprocessing reads: s3://raw-bucket/pile/README.md"
    )
    store.put_text("s3://raw-bucket/csv/a.csv", "x")
    with pytest.raises(InputError) as error:
        plan_execution({"corpus": {"s3_uri": "s3://raw-bucket/csv/"}}, "exec-3", settings, store)
    assert str(error.value) == (
        "corpus.s3_uri: no .jsonl.zstd, .jsonl.zst, .jsonl.gz, .json.zst, .json.gz, .parquet, .jsonl, .txt files "
        "under s3://raw-bucket/csv/ (1 files in other formats, e.g. s3://raw-bucket/csv/a.csv); upload the corpus first"
    )


def write_dataset(store, *, sequence_length=2048, vocab_size=50_257, tokenizer="{}", **source):
    """A dataset as the shards job leaves it (its tokenizer and a manifest per host), and the Plan step's record of
    the text it was made from (``source`` overrides its fields: corpus_s3_uri="s3://...")."""
    store.put_text("s3://datasets-bucket/tokenizers/pile/tokenizer.json", tokenizer)
    manifest = {"sequence_length": sequence_length, "vocab_size": vocab_size}
    manifest["tokenizer_sha256"] = hashlib.sha256(tokenizer.encode()).hexdigest()
    store.put_text("s3://datasets-bucket/datasets/pile/manifests/algo-1.json", json.dumps(manifest))
    record = {"corpus.s3_uri": "s3://raw-bucket/pile/", "corpus.pile_set_names": ""}
    record["preprocessing.validation_fraction"] = 0.0005
    record.update({name.replace("_", ".", 1): value for name, value in source.items()})
    store.put_text("s3://datasets-bucket/inputs/datasets/pile/source.json", json.dumps(record))


def test_existing_dataset_skips_preprocessing(settings, store):
    write_dataset(store)
    plan = plan_execution({}, "exec-2", settings, store)
    assert plan["preprocess"]["run"] is False
    forced = plan_execution(
        {"force_preprocess": True, "corpus": {"s3_uri": "s3://raw-bucket/pile/"}}, "e3", settings, store
    )
    assert forced["preprocess"]["run"] is True


@pytest.mark.parametrize(
    ("raw", "differs"),
    [
        ({"training": {"sequence_length": 1024}}, "training.sequence_length 1024 (dataset: 2048)"),
        ({"preprocessing": {"vocab_size": 32_000}}, "preprocessing.vocab_size 32000 (dataset: 50257)"),
        ({"dataset": {"tokenizer_s3_uri": "s3://raw-bucket/tok.json"}}, "dataset.tokenizer_s3_uri"),
    ],
)
def test_an_existing_dataset_made_otherwise_is_refused_unless_forced(settings, store, raw, differs):
    write_dataset(store)
    store.put_text("s3://raw-bucket/tok.json", '{"another": "tokenizer"}')
    with pytest.raises(InputError, match=r"dataset\.name: 'pile' is not valid; expected a dataset made for") as error:
        plan_execution(raw, "exec", settings, store)
    assert differs in str(error.value) and "force_preprocess" in str(error.value)
    forced = {**raw, "force_preprocess": True, "corpus": {"s3_uri": "s3://raw-bucket/pile/"}}
    assert plan_execution(forced, "exec", settings, store)["preprocess"]["run"] is True


@pytest.mark.parametrize(
    ("raw", "source", "differs"),
    [
        ({"corpus": {"s3_uri": "s3://raw-bucket/c4/"}}, {}, "corpus.s3_uri s3://raw-bucket/c4/ (dataset: s3://raw-"),
        (
            {"corpus": {"s3_uri": "s3://raw-bucket/pile/", "pile_set_names": "Github"}},
            {},
            "corpus.pile_set_names Github (dataset: )",
        ),
        (
            {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}},
            {"corpus_pile_set_names": "ArXiv,Github"},
            "corpus.pile_set_names  (dataset: ArXiv,Github)",
        ),
        (
            {"preprocessing": {"validation_fraction": 0.01}},
            {},
            "preprocessing.validation_fraction 0.01 (dataset: 0.0005)",
        ),
    ],
)
def test_a_dataset_made_from_other_text_is_refused_unless_forced(settings, store, raw, source, differs):
    for part in ("00", "01"):
        store.put_text(f"s3://raw-bucket/c4/{part}.jsonl", "x")
    write_dataset(store, **source)
    with pytest.raises(InputError, match=r"dataset\.name: 'pile' is not valid; expected a dataset made for") as error:
        plan_execution(raw, "exec", settings, store)
    assert differs in str(error.value)
    forced = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, **raw, "force_preprocess": True}
    assert plan_execution(forced, "exec", settings, store)["preprocess"]["run"] is True


def test_the_plan_records_what_a_dataset_is_made_from_and_a_dataset_without_a_record_is_not_reused(settings, store):
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/", "pile_set_names": "Github, ArXiv"}}
    plan_execution(raw, "exec", settings, store)
    assert json.loads(store.read_bytes("s3://datasets-bucket/inputs/datasets/pile/source.json")) == {
        "corpus.s3_uri": "s3://raw-bucket/pile/",
        "corpus.pile_set_names": "ArXiv,Github",
        "corpus.text_field": "text",
        "preprocessing.validation_fraction": 0.0005,
    }
    write_dataset(store)  # recorded before corpus.text_field existed: made from "text"
    corpus = {"s3_uri": "s3://raw-bucket/pile/", "pile_set_names": ""}
    assert plan_execution({"corpus": corpus}, "exec", settings, store)["preprocess"]["run"] is False
    with pytest.raises(InputError, match=r"corpus\.text_field content \(dataset: text\)"):
        plan_execution({"corpus": {**corpus, "text_field": "content"}}, "exec", settings, store)
    store.path("s3://datasets-bucket/inputs/datasets/pile/source.json").unlink()
    with pytest.raises(InputError, match=r"preprocessing\.validation_fraction 0\.0005 \(dataset: not recorded\)"):
        plan_execution({}, "exec", settings, store)


def test_source_buckets_of_the_stage_may_hold_the_corpus(settings, store):
    stage = {**settings.stage, "source_buckets": ["corpora"]}
    store.put_text("s3://corpora/c4/00.jsonl", "x")
    store.put_text("s3://corpora/c4/01.jsonl", "y")
    plan = plan_execution({"corpus": {"s3_uri": "s3://corpora/c4/"}}, "e", replace(settings, stage=stage), store)
    assert plan["requests"]["shards"]["ProcessingInputs"][1]["S3Input"]["S3Uri"] == "s3://corpora/c4/"


class KeyedStore(FolderStore):
    """The folder, but a bucket's objects are encrypted with a KMS key of its own, or unreadable (S3's answers)."""

    def __init__(self, root, keys: dict[str, str | PermissionError]):
        super().__init__(root)
        self.keys = keys

    def encryption_key(self, uri: str) -> str | None:
        answer = self.keys.get(uri[5:].partition("/")[0])
        if isinstance(answer, PermissionError):
            raise answer
        return answer


def test_a_corpus_the_jobs_could_not_read_is_refused_before_any_job(settings, tmp_path):
    """Another account's bucket, or its own KMS key: the processing job would fail after its instances started."""
    foreign = "arn:aws:kms:us-east-1:111122223333:key/0b7a8c6e-1d2f-4a3b-9c8d-7e6f5a4b3c2d"
    denied = PermissionError("AccessDenied: Access Denied")
    store = KeyedStore(tmp_path, {"corpora": foreign, "closed": denied, "raw-bucket": settings.kms_key_arn})
    for bucket in ("corpora", "closed", "raw-bucket"):
        for name in ("00.jsonl", "01.jsonl"):  # dev preprocesses on two instances, a file each at least
            store.put_text(f"s3://{bucket}/c4/{name}", "x")
    stage = replace(settings, stage={**settings.stage, "source_buckets": ["corpora", "closed"]})
    with pytest.raises(InputError) as error:
        plan_execution({"corpus": {"s3_uri": "s3://corpora/c4/"}}, "e", stage, store)
    assert str(error.value) == (
        f"corpus.s3_uri: s3://corpora/c4/00.jsonl is encrypted with the KMS key {foreign}, which the jobs' role may "
        "not use: add it to the stage's source_bucket_keys (its key policy admitting the stack's roles) and deploy"
    )
    mix = {"sources": [{"name": "web", "s3_uri": "s3://raw-bucket/c4/"}, {"name": "x", "s3_uri": "s3://closed/c4/"}]}
    with pytest.raises(InputError) as error:
        plan_execution({"corpus": mix}, "e", stage, store)
    assert str(error.value).startswith(
        "corpus.sources[1].s3_uri: the Plan step could not read s3://closed/c4/00.jsonl (AccessDenied: Access "
        "Denied): a bucket of another account must admit the stack's roles in its policy"
    )
    assert not store.list("s3://datasets-bucket/inputs/")  # refused before the first write
    assert plan_execution({"corpus": {"s3_uri": "s3://raw-bucket/c4/"}}, "e", stage, store)  # the stack's own key
    keyed = {**stage.stage, "source_bucket_keys": [foreign]}
    assert plan_execution({"corpus": {"s3_uri": "s3://corpora/c4/"}}, "e", replace(stage, stage=keyed), store)


def test_existing_or_given_tokenizer_is_reused(settings, store):
    store.put_text("s3://raw-bucket/tok.json", "{}")
    given = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "dataset": {"tokenizer_s3_uri": "s3://raw-bucket/tok.json"}}
    assert plan_execution(given, "e", settings, store)["preprocess"]["train_tokenizer"] is False
    store.put_text("s3://datasets-bucket/tokenizers/pile/tokenizer.json", "{}")
    plan = plan_execution({"corpus": {"s3_uri": "s3://raw-bucket/pile/"}}, "e", settings, store)
    assert plan["preprocess"] == {"run": True, "train_tokenizer": False, "dataset_ready": False}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "input: [] is not valid; expected a JSON object"),
        ({"training": {"instance_count": 0}}, "training.instance_count: 0 is not valid"),
        ({"training": {"model_preset": "gpt5"}}, "training.model_preset: 'gpt5' is not valid"),
        ({"traning": {}}, "did you mean 'training'"),
        ({"corpus": {"s3_uri": "/local/path"}}, "corpus.s3_uri: '/local/path' is not valid; expected an s3://"),
        ({"dataset": {"name": "../escape"}}, "dataset.name: '../escape' is not valid"),
        ({"hyperparameters": {"max_steps": 10}}, "hyperparameters.max_steps: 10 is not valid; expected the training"),
        ({"hyperparameters": {"microbatches": 4}}, "hyperparameters.microbatches: 4 is not valid"),
        ({"hyperparameters": {"learning_rate": [1]}}, "hyperparameters.learning_rate: [1] is not valid"),
        ({"hyperparameters": {"n_layer": 4}}, "hyperparameters.n_layer: 4 is not valid; expected the training"),
        (
            {"hyperparameters": {"hf_checkpoint": False}},
            "hyperparameters.hf_checkpoint: False is not valid; expected the",
        ),
        (
            {"training": {"hf_checkpoint": "no"}},
            "training.hf_checkpoint: 'no' is not valid; expected a value of type bool",
        ),
        ({"hyperparameters": {"lerning_rate": 1e-3}}, "did you mean 'learning_rate'"),
        ({"hyperparameters": {"warmup": 7}}, "hyperparameters.warmup: 7 is not valid; expected a train.py"),
        ({"hyperparameters": {"learning": 0.5}}, "hyperparameters.learning: 0.5 is not valid"),
        (
            {"hyperparameters": {"warmup_steps": "many"}},
            "warmup_steps: 'many' is not valid; expected an integer from 0 to",
        ),
        (
            {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "hyperparameters": {"sample_prompt": "x" * 3000}},
            "hyperparameters.sample_prompt: 3,002 characters encoded; SageMaker takes at most 2,500",
        ),
        ({}, "corpus.s3_uri: None is not valid; expected the prefix of the corpus to preprocess"),
        ({"training": {"image_uri": "111122223333.dkr.ecr.us-east-1.amazonaws.com/x:1"}}, "the stage's (None)"),
        ({"training": {"data_parallel_engine": "mpi"}}, "stock TensorFlow 2.21 image does not ship"),
        ({"corpus": {"s3_uri": "s3://someone-elses/pile/"}}, "corpus.s3_uri: 's3://someone-elses/pile/' is not valid"),
        (
            {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "dataset": {"tokenizer_s3_uri": "s3://other/t.json"}},
            "expected a URI in a bucket the stack may read: raw-bucket, datasets-bucket",
        ),
        ({"hyperparameters": {"sagemaker_program": "x.py"}}, "hyperparameters.sagemaker_program: 'x.py' is not valid"),
        ({"corpus": {"s3_uri": "s3://raw-bucket/empty/"}}, "corpus.s3_uri: no .jsonl"),
        (
            {"corpus": {"s3_uri": "s3://raw-bucket/pile/", "text_field": ""}},
            "corpus.text_field: '' is not valid; expected a field name of 1 to 128 printable characters",
        ),
        (
            {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "dataset": {"tokenizer_s3_uri": "s3://raw-bucket/no/"}},
            "dataset.tokenizer_s3_uri: 's3://raw-bucket/no/' is not valid; expected an existing tokenizer.json",
        ),
        (
            {"corpus": {"s3_uri": "s3://raw-bucket/pile/", "pile_set_names": "Github," + "x" * 240}},
            "x... (242 characters) is not valid; expected names of at most 239 characters",
        ),
        (
            {"corpus": {"s3_uri": "s3://raw-bucket/pile/", "pile_set_names": ",".join(f"s{i}" for i in range(65))}},
            "is not valid; expected at most 64 comma-separated names",
        ),
        ({"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "preprocessing": {"instance_count": 6}}, "expected at most 5"),
        # Hyperparameters that bypassed the fit and the ranges
        ({"hyperparameters": {"vocab_size": 10**9}}, "hyperparameters.vocab_size: 1,000,000,000 rows: gpt3-125m at"),
        ({"hyperparameters": {"vocab_size": 1000}}, "expected 0 or at least the tokenizer's preprocessing.vocab_size"),
        (
            {"hyperparameters": {"learning_rate": "NaN"}},
            "hyperparameters.learning_rate: 'NaN' is not valid; expected a",
        ),
        ({"hyperparameters": {"dropout": "nan"}}, "hyperparameters.dropout: 'nan' is not valid; expected a finite"),
        ({"hyperparameters": {"weight_decay": "Infinity"}}, "hyperparameters.weight_decay: 'Infinity' is not valid"),
        ({"hyperparameters": {"sample_tokens": 10**9}}, "hyperparameters.sample_tokens: 1000000000 is not valid"),
        ({"hyperparameters": {"eval_batches": 10**9}}, "hyperparameters.eval_batches: 1000000000 is not valid"),
        ({"hyperparameters": {"shuffle_buffer": 10**12}}, "hyperparameters.shuffle_buffer: 1000000000000 is not"),
        ({"hyperparameters": {"keep_checkpoints": 10**9}}, "hyperparameters.keep_checkpoints: 1000000000 is not"),
        ({"hyperparameters": {"seed": 10**5000}}, "hyperparameters.seed: <an integer of about 5,000 digits> is not"),
        ({"hyperparameters": {"sample_prompt": "--export_dir=/x"}}, "expected a string that does not start with '-'"),
        ({"training": {"train_tokens": "1e400"}}, "training.train_tokens: '1e400' is not valid; expected an amount"),
        ({"training": {"train_tokens": 10**16}}, "training.train_tokens: 10000000000000000 is not valid; expected at"),
        ({"training": {"n_layer": 400}}, "training.n_layer: 400 is not valid; expected an integer from 0 to 256"),
        ({"training": {"d_model": 100000007}}, "training.d_model: 100000007 is not valid; expected an integer from"),
        ({"training": {"micro_batch_size": 10**9}}, "training.micro_batch_size: 1000000000 is not valid"),
        ({"dataset": {"name": "x" * 200_000}}, "xxxxxxxx... (200,002 characters) is not valid; expected letters"),
    ],
    ids=lambda value: None if isinstance(value, dict) else value[:40],
)
def test_bad_input_names_the_field(settings, store, raw, message):
    with pytest.raises(InputError, match=None) as error:
        plan_execution(raw, "exec", settings, store)
    assert message in str(error.value)


def test_the_most_and_the_longest_pile_set_names_are_accepted(settings, store):
    longest = aws_limits().container_argument_chars - len(PILE_SET_OPTION)
    assert (longest, MAX_PILE_SET_NAMES) == (239, 64)  # one more character, or one more name, is refused (above)
    names = [f"{i:02d}".ljust(longest, "x") for i in range(MAX_PILE_SET_NAMES)]
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/", "pile_set_names": ",".join(names)}}
    arguments = plan_execution(raw, "exec", settings, store)["requests"]["shards"]["AppSpecification"]
    assert [a for a in arguments["ContainerArguments"] if a.startswith(PILE_SET_OPTION)] == [
        PILE_SET_OPTION + name for name in names
    ]


def test_no_hyperparameter_the_request_sets_may_be_given(settings, store):
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}}
    written = plan_execution(raw, "exec", settings, store)["requests"]["training"]["HyperParameters"]
    assert {"tensorboard_dir", "profile_start", "profile_steps", "health_rules", "n_layer", "engine"} <= set(written)
    planned = {"checkpoint_every"}  # a default the Plan step chooses for GPU runs; the input's own wins
    assert planned <= set(written)
    given = plan_execution({**raw, "hyperparameters": {"checkpoint_every": 7}}, "exec", settings, store)
    assert given["requests"]["training"]["HyperParameters"]["checkpoint_every"] == "7"
    for name, text in written.items():
        if name in planned:
            continue
        with pytest.raises(InputError, match=rf"^hyperparameters\.{name}: .* is not valid; expected "):
            plan_execution({**raw, "hyperparameters": {name: json.loads(text)}}, "exec", settings, store)


@pytest.mark.parametrize(
    "name", ["export_dir", "output_dir", "train_dir", "validation_dir", "checkpoint_dir", "tensorboard_dir"]
)
def test_no_path_in_the_container_may_be_given(settings, store, name):
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "hyperparameters": {name: "/tmp/x/model"}}
    with pytest.raises(InputError, match=rf"^hyperparameters\.{name}: '/tmp/x/model' is not valid; expected no such"):
        plan_execution(raw, "exec", settings, store)


def test_the_summary_states_the_recipe_and_its_departures(settings, store):
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "hyperparameters": {"warmup_steps": 7}}
    recipe = plan_execution(raw, "exec", settings, store)["summary"]["recipe"]
    # dev: gpt3-125m at Table 2.1's 0.5 M tokens a step for 1 B tokens = 1,908 steps, shorter than 260 B tokens
    assert (recipe["peak_lr"], recipe["warmup_steps"], recipe["decay_steps"]) == (6e-4, 7, 1_908)
    assert [d.split(" (")[0] for d in recipe["departures"]] == ["warm-up 7 steps", "decay over the run's 1,908 steps"]


def test_the_offline_checks_come_first_and_make_the_summary_s_recipe(settings, store):
    class Unread:  # any listing fails: check_input reads no object store
        def list(self, uri):
            raise AssertionError(uri)

    raw = {"corpus": {"s3_uri": "s3://someone-elses/pile/"}}
    with pytest.raises(InputError, match=r"^corpus\.s3_uri: 's3://someone-elses/pile/' is not valid"):
        plan_execution(raw, "exec", settings, Unread())
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "hyperparameters": {"learning_rate": 3e-4}}
    inp, recipe = check_input(raw, settings)
    assert inp.hyperparameters == {"learning_rate": 3e-4} and recipe.peak_lr == 3e-4
    assert plan_execution(raw, "exec", settings, store)["summary"]["recipe"]["peak_lr"] == recipe.peak_lr


def test_deploy_shorthand_and_extra_hyperparameters(settings, store):
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "deploy": True, "hyperparameters": {"learning_rate": 6e-4}}
    plan = plan_execution(raw, "exec", settings, store)
    assert plan["deploy"] is True
    assert plan["requests"]["training"]["HyperParameters"]["learning_rate"] == "0.0006"


def test_the_hugging_face_checkpoint_is_on_unless_the_input_turns_it_off(settings, store):
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}}
    on = plan_execution(raw, "exec", settings, store)
    off = plan_execution({**raw, "training": {"hf_checkpoint": False}}, "exec", settings, store)
    assert on["hf_checkpoint"] == f"hf/ in s3://models-bucket/training/{on['names']['training']}/output/model.tar.gz"
    assert on["requests"]["training"]["HyperParameters"]["hf_checkpoint"] == "true"
    assert off["hf_checkpoint"] == "none (training.hf_checkpoint is false)"
    assert off["requests"]["training"]["HyperParameters"]["hf_checkpoint"] == "false"


def test_a_layout_that_does_not_fit_fails_with_the_estimate_and_its_suggestions(settings, store):
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "training": {"recompute": False, "micro_batch_size": 16}}
    with pytest.raises(InputError, match=r"^training: gpt3-125m at micro-batch 16 x 2048 tokens needs") as error:
        plan_execution(raw, "e", settings, store)
    assert (
        "but ml.g5.12xlarge has 20.1 GiB usable per device (24 GiB marketed). Set training.recompute = true (15.9 "
        in str(error.value)
    )
    assert not store.list("s3://datasets-bucket/inputs/")  # refused before the one write


def test_a_run_that_cannot_finish_in_its_max_run_hours_is_refused_naming_both_and_the_fixes(settings, store):
    # dev: 24 h; recompute unset: the least that fits (attention), faster than full recomputation
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "training": {"train_tokens": "100B"}}
    with pytest.raises(InputError) as error:
        plan_execution(raw, "e", settings, store)
    message = str(error.value)
    assert message.startswith("training.max_run_hours: the run needs about 325 h but training.max_run_hours is 24")
    assert "Set training.max_run_hours = 325 (SageMaker allows up to 672); or training.train_tokens = 7.2B" in message
    assert "unfinished after about $" in message and "$0 " not in message
    assert not store.list("s3://datasets-bucket/inputs/")  # refused before the one write
    raw["training"]["max_run_hours"] = 325
    assert plan_execution(raw, "e", settings, store)["requests"]["training"]["StoppingCondition"] == {
        "MaxRuntimeInSeconds": 325 * 3600,
        "MaxWaitTimeInSeconds": (325 + 72) * 3600,  # and 72 h of waiting for spot capacity (spot_wait_hours)
    }


def test_tokenizer_sample_bytes_takes_every_size_preprocessing_reads(settings, store):
    for i, text in enumerate(("6M", "1G", "1.5G", "2GiB", "500m", "1073741824", "lots", "1.5", "G", "-1G", "1 TB")):
        try:
            OPTIONS["sample_bytes"].check(text)  # as preprocess.py reads --sample_bytes
            reads = True
        except argparse.ArgumentTypeError:
            reads = False
        raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/", "tokenizer_sample_bytes": text}}
        try:
            plan_execution(raw, f"exec-{i}", settings, store)
            refused = ""
        except InputError as error:
            refused = str(error)
        assert refused.startswith("corpus.tokenizer_sample_bytes: ") != reads, (text, refused)


def test_a_run_shorter_than_its_warm_up_warms_up_over_half_of_it_and_says_so(settings, store):
    # dev's gpt3-125m at 4,096 tokens a step for 250 steps: the recipe's 375 M tokens would be 91,553 warm-up steps
    training = {"global_batch_tokens": 4_096, "train_tokens": 4_096 * 250, "sequence_length": 128}
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, "training": training}
    recipe = plan_execution(raw, "exec", settings, store)["summary"]["recipe"]
    assert (recipe["warmup_steps"], recipe["decay_steps"]) == (125, 250)
    assert any(d.startswith("warm-up 125 steps, half the run's 250") for d in recipe["departures"])
    raw["hyperparameters"] = {"warmup_steps": 300}
    with pytest.raises(InputError, match=r"^hyperparameters.warmup_steps: 300 steps is not shorter than the run's 250"):
        plan_execution(raw, "exec", settings, store)


# The slowest inputs found: the deepest, widest and longest legal models that do not fit (the layout search
# runs), a micro-batch of 4,096 sequences of one token, a vocabulary of 2^32 rows, and just past each range.
SLOW_INPUTS = [
    {"training": {"n_layer": 256}},
    {"training": {"n_layer": 256, "model_parallel_degree": 4}},
    {"training": {"n_layer": 257}},
    {"training": {"n_layer": 100_000}},
    {"training": {"d_model": 65_536, "n_head": 1_021}},
    {"training": {"d_model": 100_000_007}},
    {"training": {"micro_batch_size": 4_096, "sequence_length": 1, "global_batch_tokens": 16_384}},
    {"training": {"micro_batch_size": 4_096, "sequence_length": 256, "global_batch_tokens": 2**30}},
    {"training": {"micro_batch_size": 10**9}},
    {"training": {"n_layer": 256, "sequence_length": 1_048_576, "micro_batch_size": 1, "global_batch_tokens": 2**22}},
    {"training": {"train_tokens": "1e15", "global_batch_tokens": 1}},
    {"hyperparameters": {"vocab_size": 2**32}},
    {"corpus": {"s3_uri": "s3://raw-bucket/pile/", "pile_set_names": ",".join(f"s{i}" for i in range(64))}},
]
# The Plan function has 60 s at 512 MB, about 0.29 of a vCPU (infra/workflow/plan_function.py): some 17 s of
# one core. Each input gets a third of that, in this process's CPU time (a loaded machine does not count).
CPU_BUDGET_SECONDS = 6.0


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_plan_step_answers_the_slowest_inputs_within_its_budget(store, stage):
    from infra.plan_step.conftest import make_settings

    settings = make_settings(stage)

    def over_budget(*_):
        raise TimeoutError(f"{raw} ran past {CPU_BUDGET_SECONDS} s of CPU")

    previous = signal.signal(signal.SIGVTALRM, over_budget)
    try:
        for raw in SLOW_INPUTS:
            start = time.process_time()
            signal.setitimer(signal.ITIMER_VIRTUAL, CPU_BUDGET_SECONDS)
            try:
                plan_execution({"corpus": {"s3_uri": "s3://raw-bucket/pile/"}, **raw}, "e", settings, store)
            except InputError:
                pass
            finally:
                signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            assert time.process_time() - start < CPU_BUDGET_SECONDS, raw
    finally:
        signal.signal(signal.SIGVTALRM, previous)


@pytest.mark.parametrize("execution_name", ["..", "."])
def test_an_execution_name_that_is_no_folder_name_needs_a_run_name(settings, store, execution_name):
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/"}}
    with pytest.raises(InputError, match=r"^run_name: None is not valid; expected a run_name"):
        plan_execution(raw, execution_name, settings, store)
    plan = plan_execution({**raw, "run_name": "run-1"}, execution_name, settings, store)
    assert plan["checkpoint_uri"] == "s3://checkpoints-bucket/run-1/"
