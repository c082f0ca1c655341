"""The preprocessing jobs' requests, checked field by field without synthesizing anything."""

from infra.plan_step import processing_requests
from infra.plan_step.execution_input import parse_input


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
