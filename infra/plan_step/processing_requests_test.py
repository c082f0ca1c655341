"""The preprocessing jobs' requests, checked field by field without synthesizing anything."""

import argparse

from infra.plan_step import processing_requests
from infra.plan_step.execution_input import parse_input
from infra.training_code import preprocess_options, training_module


def test_shards_job_splits_the_corpus_by_file_across_instances(settings):
    inp = parse_input({"corpus": {"s3_uri": "s3://raw-bucket/pile/"}}, settings.stage_config)
    request = processing_requests.shards_job_request(settings, inp, "gpt-dev-x-shd")
    assert set(request) == set(processing_requests.PROCESSING_FIELDS)
    raw, tokenizer = request["ProcessingInputs"][1:]
    assert raw["S3Input"]["S3Uri"] == "s3://raw-bucket/pile/"
    assert raw["S3Input"]["S3DataDistributionType"] == "ShardedByS3Key"
    assert tokenizer["S3Input"]["S3Uri"] == "s3://datasets-bucket/tokenizers/pile/tokenizer.json"
    assert request["ProcessingResources"]["ClusterConfig"]["InstanceCount"] == 2  # dev stage
    args = request["AppSpecification"]["ContainerArguments"]
    assert args[0] == "shards"
    assert args[args.index("--sequence_length") + 1] == "2048"
    assert request["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"] == "s3://datasets-bucket/datasets/pile/"


def test_tokenizer_job_reads_only_the_sample_manifest(settings):
    inp = parse_input({}, settings.stage_config)
    request = processing_requests.tokenizer_job_request(
        settings, inp, "gpt-dev-x-tok", {"": "s3://datasets-bucket/inputs/m.manifest"}
    )
    raw = request["ProcessingInputs"][1]["S3Input"]
    assert (raw["S3DataType"], raw["S3Uri"]) == ("ManifestFile", "s3://datasets-bucket/inputs/m.manifest")
    assert request["ProcessingResources"]["ClusterConfig"]["InstanceCount"] == 1
    assert (
        request["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"] == "s3://datasets-bucket/tokenizers/pile/"
    )


def test_both_jobs_arguments_parse_back_to_what_the_plan_step_meant(settings):
    raw = {"corpus": {"s3_uri": "s3://raw-bucket/pile/", "pile_set_names": "ArXiv, Gutenberg (PG-19)"}}
    inp = parse_input(raw, settings.stage_config)
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    training_module("preprocess_options").add_options(parser, preprocess_options())
    tokenizer = processing_requests.tokenizer_job_request(settings, inp, "t", {"": "s3://b/m.manifest"})
    shards = processing_requests.shards_job_request(settings, inp, "s")
    read = [parser.parse_args(r["AppSpecification"]["ContainerArguments"]) for r in (tokenizer, shards)]
    pre, sample_bytes = inp.preprocessing, training_module("sizes").parse_amount(inp.corpus.tokenizer_sample_bytes)
    assert (read[0].mode, read[0].vocab_size, read[0].sample_bytes) == ("tokenizer", pre.vocab_size, sample_bytes)
    assert (read[1].mode, read[1].sequence_length, read[1].validation_fraction) == (
        "shards",
        inp.training.sequence_length,
        pre.validation_fraction,
    )
    assert read[0].pile_set_names == read[1].pile_set_names == {"ArXiv", "Gutenberg (PG-19)"}
