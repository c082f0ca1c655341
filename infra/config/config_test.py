"""Configuration loading and validation: every bad value names its field and what would be valid."""

from __future__ import annotations

import json
import re

import pytest

from infra.config import PLACEHOLDER_ACCOUNT, ConfigError, StageConfig, load_stage_config
from tests.synth import cli_context


def load(stage: dict | None = None, **context) -> StageConfig:
    return load_stage_config({"stage": "dev", "stages": {"dev": stage or {}}, **context})


def test_defaults_are_valid_and_typed():
    config = load()
    assert config.name == "dev"
    assert config.account == PLACEHOLDER_ACCOUNT
    assert config.training.shape.d_model == 768  # gpt3-125m
    assert config.training.data_parallel_replicas == 8  # one ml.p4d.24xlarge: 8 GPUs


def test_every_stage_in_cdk_json_is_valid():
    context = cli_context()
    for stage in context["stages"]:
        assert load_stage_config({**context, "stage": stage}).name == stage


def test_stage_values_override_defaults_and_file_overrides_stage(tmp_path):
    override = tmp_path / "override.json"
    override.write_text(json.dumps({"training": {"instance_count": 4}, "notification_email": "ml@example.com"}))
    config = load({"training": {"instance_count": 2, "spot": False}}, config=str(override))
    assert config.training.instance_count == 4  # the file wins
    assert config.training.spot is False  # the stage's value survives a partial override
    assert config.notification_email == "ml@example.com"


def test_default_account_comes_from_the_caller_unless_the_stage_names_one():
    config = load_stage_config({"stage": "dev", "stages": {"dev": {}}}, default_account="210987654321")
    assert config.account == "210987654321"
    named = {"stage": "dev", "stages": {"dev": {"account": "111122223333"}}}
    assert load_stage_config(named, default_account="210987654321").account == "111122223333"


@pytest.mark.parametrize(
    ("stage", "field", "hint"),
    [
        ({"trainig": {}}, "trainig", "did you mean 'training'"),
        ({"training": {"instance_cout": 2}}, "training.instance_cout", "did you mean 'instance_count'"),
        ({"training": {"instance_count": "2"}}, "training.instance_count", "type int"),
        ({"training": {"spot": "yes"}}, "training.spot", "type bool"),
        ({"training": {"micro_batch_size": True}}, "training.micro_batch_size", "type int"),
        ({"training": {"instance_count": 0}}, "training.instance_count", "a positive integer"),
        ({"preprocessing": {"instance_count": -1}}, "preprocessing.instance_count", "1 to 100 (SageMaker's limit"),
        ({"preprocessing": {"instance_count": 500}}, "preprocessing.instance_count", "ProcessingInstanceCount"),
        ({"preprocessing": {"volume_size_gb": 20_000}}, "preprocessing.volume_size_gb", "1 to 16,384"),
        ({"preprocessing": {"shard_size_mb": 10**9}}, "preprocessing.shard_size_mb", "at most 204,800 MB"),
        ({"deploy": {"instance_type": "ml.p3dn.24xlarge"}}, "deploy.instance_type", "SageMaker hosting accepts"),
        ({"training": {"image_uri": "my-image"}}, "training.image_uri", "an ECR image URI"),
        ({"source_buckets": "corpora"}, "source_buckets", "a JSON array of strings"),
        ({"source_buckets": ["s3://corpora"]}, "source_buckets", "S3 bucket names"),
        ({"source_bucket_keys": ["alias/corpora"]}, "source_bucket_keys", "KMS key ARNs"),
        (
            {"source_bucket_keys": ["arn:aws:kms:us-east-1:111122223333:alias/corpora"]},
            "source_bucket_keys",
            "(not an alias)",
        ),
        ({"training": {"instance_type": "ml.p4d.24xlarg"}}, "training.instance_type", "did you mean 'ml.p4d.24xlarge'"),
        ({"preprocessing": {"instance_type": "c5.9xlarge"}}, "preprocessing.instance_type", "ml.c5.9xlarge"),
        ({"deploy": {"instance_type": "ml.x1.huge"}}, "deploy.instance_type", "one of"),
        ({"training": {"n_head": 7}}, "training.n_head", "a divisor of the model width d_model=768"),
        ({"training": {"d_model": 1000, "n_head": 16}}, "training.n_head", "d_model=1000"),
        ({"training": {"model_preset": "gpt4"}}, "training.model_preset", "gpt3-125m"),
        ({"training": {"model_preset": "llama3.2-1b"}}, "training.model_preset", "the training job does not train yet"),
        ({"preprocessing": {"shard_size_mb": 0}}, "preprocessing.shard_size_mb", "a positive integer"),
        ({"preprocessing": {"vocab_size": 100}}, "preprocessing.vocab_size", "257 (256 bytes + end-of-text)"),
        ({"preprocessing": {"validation_fraction": 0.9}}, "preprocessing.validation_fraction", "0 to 0.5"),
        ({"training": {"precision": "fp8"}}, "training.precision", "bf16, fp16, fp32"),
        ({"training": {"instance_type": "ml.p3.16xlarge"}}, "training.precision", "V100 has no bfloat16"),
        ({"training": {"data_parallel_engine": "horovd"}}, "training.data_parallel_engine", "multi_worker_mirrored"),
        ({"training": {"data_source": "fsx"}}, "training.data_source", "efs, s3"),
        ({"training": {"max_run_hours": 1000}}, "training.max_run_hours", "at most 672"),
        ({"training": {"spot_wait_hours": 673}}, "training.spot_wait_hours", "at most 672 (28 days of waiting)"),
        ({"training": {"spot_wait_hours": 0}}, "training.spot_wait_hours", "a positive integer"),
        ({"observability": {"capacity_wait_alarm_hours": 0}}, "observability.capacity_wait_alarm_hours", "1 to 672"),
        (
            {"training": {"global_batch_tokens": 1000}},
            "training.global_batch_tokens",
            "a multiple of micro_batch_size x sequence_length x replicas = 8 x 2,048 x 8 = 131,072 tokens",
        ),
        ({"training": {"global_batch_tokens": 2048 * 12}}, "training.global_batch_tokens", "8 x 2,048 x 8 = 131,072"),
        ({"network": {"nat_gateways": 3}}, "network.nat_gateways", "1 to network.max_azs (2)"),
        ({"network": {"isolated": True}}, "network.nat_gateways", "0 when network.isolated"),
        ({"storage": {"efs_throughput_mode": "fast"}}, "storage.efs_throughput_mode", "elastic, bursting, provisioned"),
        ({"storage": {"efs_throughput_mode": "provisioned"}}, "storage.efs_provisioned_mibps", "1 to 3414"),
        ({"storage": {"log_retention_days": 10}}, "storage.log_retention_days", "one of 1, 3, 5"),
        (
            {"observability": {"profiling_interval_ms": 250}},
            "observability.profiling_interval_ms",
            "one of 100, 200, 500, 1000, 5000, 60000",
        ),
        (
            {"observability": {"state_machine_log_level": "DEBUG"}},
            "observability.state_machine_log_level",
            "ALL, ERROR",
        ),
        (
            {"observability": {"efs_throughput_alarm_percent": 0}},
            "observability.efs_throughput_alarm_percent",
            "1 to 100",
        ),
        ({"observability": {"log_execution_data": "no"}}, "observability.log_execution_data", "type bool"),
        ({"observability": {"debugger": "on"}}, "observability.debugger", "type bool"),
        ({"observability": {"input_bound_percent": 101}}, "observability.input_bound_percent", "1 to 100"),
        ({"observability": {"loss_min_drop_percent": -1}}, "observability.loss_min_drop_percent", "0 to 100"),
        ({"observability": {"stalled_minutes": 0}}, "observability.stalled_minutes", "a positive integer"),
        ({"observability": {"profile_steps": -1}}, "observability.profile_steps", "a non-negative integer"),
        ({"account": "12345"}, "account", "a 12-digit AWS account id"),
        ({"region": "us-east-9"}, "region", "did you mean"),
        ({"notification_email": "not-an-address"}, "notification_email", "an e-mail address"),
        ({"network": []}, "network", "a JSON object"),
    ],
)
def test_invalid_values_name_the_field_the_value_and_the_fix(stage, field, hint):
    with pytest.raises(ConfigError) as error:
        load(stage)
    assert error.value.field == field
    assert str(error.value).startswith(f"{field}: ")
    assert "is not valid; expected" in str(error.value)
    assert hint in str(error.value)


def test_unknown_stage_lists_the_known_ones():
    with pytest.raises(
        ConfigError, match=r"stage: 'staging' is not valid; expected one of the stages in cdk.json: a, b"
    ):
        load_stage_config({"stage": "staging", "stages": {"a": {}, "b": {}}})


def test_override_file_must_exist_and_be_a_json_object(tmp_path):
    with pytest.raises(ConfigError, match=r"config: .* the path of a JSON file"):
        load(config=str(tmp_path / "missing.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ConfigError, match="valid JSON"):
        load(config=str(broken))
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="a JSON object at the top level"):
        load(config=str(listed))


def test_model_parallel_degree_divides_the_gpus_and_the_replicas():
    with pytest.raises(
        ConfigError, match=r"training.model_parallel_degree: 3 is not valid; expected a divisor of the 8"
    ):
        load({"training": {"model_parallel_degree": 3}})
    with pytest.raises(ConfigError, match=r"training.model_parallel_degree: 0 is not valid; expected a positive"):
        load({"training": {"model_parallel_degree": 0}})
    # 8 GPUs / 2 stages; micro-batch 4: a pipeline runs without XLA, whose logits need 34 GiB at dev's 8
    assert load({"training": {"model_parallel_degree": 2, "micro_batch_size": 4}}).training.data_parallel_replicas == 4


def test_microbatches_divide_a_replicas_micro_batches_and_pipelines_need_the_tf_engine():
    # 524,288 tokens / 2048 = 256 sequences / (8 x 4 replicas) = 8 micro-batches per replica with K = 2.
    config = load({"training": {"model_parallel_degree": 2, "microbatches": 4}})
    assert config.training.microbatches == 4
    with pytest.raises(ConfigError, match=r"training.microbatches: 3 is not valid; expected 0 or a divisor of the 8"):
        load({"training": {"model_parallel_degree": 2, "microbatches": 3}})
    image = "111122223333.dkr.ecr.us-east-1.amazonaws.com/tf-horovod:2.11"
    with pytest.raises(ConfigError, match=r"training.data_parallel_engine: 'mpi' is not valid; expected multi_worker"):
        load({"training": {"model_parallel_degree": 2, "data_parallel_engine": "mpi", "image_uri": image}})


def test_the_mpi_engine_needs_an_image_with_horovod():
    with pytest.raises(ConfigError, match=r"stock TensorFlow 2.21 image does not ship"):
        load({"training": {"data_parallel_engine": "mpi"}})
    image = "111122223333.dkr.ecr.us-east-1.amazonaws.com/tf-horovod:2.11"
    assert load({"training": {"data_parallel_engine": "mpi", "image_uri": image}}).training.image_uri == image


def test_the_stage_name_comes_from_the_command_line_only(tmp_path):
    override = tmp_path / "o.json"
    override.write_text('{"name": "prod"}')
    with pytest.raises(ConfigError, match=r"config.name: 'prod' is not valid; expected no name: .* -c stage \('dev'\)"):
        load_stage_config({"stage": "dev", "stages": {"dev": {}, "prod": {}}, "config": str(override)})
    with pytest.raises(ConfigError, match=r"stages.dev.name"):
        load_stage_config({"stage": "dev", "stages": {"dev": {"name": "prod"}}})


def test_a_training_config_that_does_not_fit_names_the_smallest_change_that_does():
    too_big = {"model_preset": "gpt3-1.3b", "recompute": False, "micro_batch_size": 4, "instance_count": 4}
    with pytest.raises(ConfigError) as error:
        load({"training": {**too_big, "global_batch_tokens": 1_048_576}})
    assert error.value.field == "training"
    assert "needs 57.3 GiB per device" in str(error.value)
    assert (
        "but ml.p4d.24xlarge has 37.6 GiB usable per device (40 GiB marketed). Set training.recompute = true "
        in str(error.value)
    )
    assert "is not valid" not in str(error.value)  # a sentence, not a quoted value


def test_recompute_is_a_mode_a_boolean_or_unset():
    with pytest.raises(ConfigError, match=r"training.recompute: 'blocks' is not valid; expected one of none, att"):
        load({"training": {"recompute": "blocks"}})
    assert load({"training": {"recompute": "attention"}}).training.recompute == "attention"


def test_a_run_longer_than_its_max_run_hours_names_both_numbers_and_the_fixes():
    prod = {"model_preset": "gpt3-1.3b", "global_batch_tokens": 1_048_576, "micro_batch_size": 4, "instance_count": 4}
    with pytest.raises(ConfigError) as error:
        load({"training": {**prod, "train_tokens": "300B", "max_run_hours": 200}})
    assert error.value.field == "training.max_run_hours"
    message = str(error.value)
    assert "the run needs about 253 h but training.max_run_hours is 200: 219.0 h of training" in message
    assert "(300B tokens at 34.7% MFU, modelled) + 15% for checkpoints and spot restarts + 0.5 h start-up" in message
    assert "Set training.max_run_hours = 253 (SageMaker allows up to 672)" in message
    assert "or training.train_tokens = 237.6B (what 200 h trains); or training.instance_count = 8" in message
    assert load({"training": {**prod, "train_tokens": "237.6B", "max_run_hours": 200}})  # the fix it names fits
    assert load({"training": {**prod, "train_tokens": "300B", "max_run_hours": 253}})
    on_demand = {**prod, "train_tokens": "300B", "max_run_hours": 300, "spot": False}  # 219.0 x 1.05 + 0.5 = 230.5
    assert load({"training": on_demand}).training.max_run_hours == 300


def test_counts_of_tokens_may_be_written_as_sizes():
    training = load({"training": {"train_tokens": "1.5B", "global_batch_tokens": "524_288"}}).training
    assert (training.train_tokens, training.global_batch_tokens) == (1_500_000_000, 524_288)
    with pytest.raises(ConfigError, match=r"training.train_tokens: 'lots' is not valid; expected an amount such as"):
        load({"training": {"train_tokens": "lots"}})


@pytest.mark.parametrize(("name", "meant"), [("gpt2-small", "gpt3-125m"), ("gpt2-xl", "gpt3-1.3b"), ("tiyn", "tiny")])
def test_an_unknown_preset_is_matched_by_size_before_spelling(name, meant):
    with pytest.raises(ConfigError, match=rf"\(did you mean '{re.escape(meant)}'\?\)"):
        load({"training": {"model_preset": name}})


@pytest.mark.parametrize(
    ("security", "hint"),
    [
        ({"compliance_packs": ["AwsSolutions", "NIST80053"]}, "'NIST80053' is not valid; expected one of Aws"),
        ({"compliance_packs": ["AwsSolutions", "HIPAASecurty"]}, "(did you mean 'HIPAASecurity'?)"),
        ({"compliance_packs": ["NIST80053R5"]}, "includes 'AwsSolutions' (it always runs)"),
        ({"compliance_packs": ["AwsSolutions", "AwsSolutions"]}, "each pack at most once"),
        ({"compliance_packs": "AwsSolutions"}, "a JSON array of strings"),
        ({"plan_reserved_concurrency": -1}, "0 (unreserved) to 1000"),
        ({"inter_container_encryption": False}, "why the hosts' traffic may go unencrypted, 20 to 500 characters"),
        ({"inter_container_encryption": False, "inter_container_encryption_off_reason": "faster"}, "20 to 500"),
        ({"inter_container_encryption_off_reason": "no reason needed, it is on"}, "no reason while"),
        ({"inter_container_encryption": "no"}, "expected a value of type bool"),
    ],
)
def test_security_names_the_pack_or_setting_and_the_fix(security, hint):
    with pytest.raises(ConfigError) as error:
        load({"security": security})
    assert error.value.field.startswith("security.")
    assert hint in str(error.value)


def test_compliance_packs_default_to_all_four_and_a_stage_may_choose_fewer():
    assert load().security.compliance_packs == ("AwsSolutions", "NIST80053R5", "HIPAASecurity", "PCIDSS321")
    chosen = load({"security": {"compliance_packs": ["AwsSolutions", "PCIDSS321"]}})
    assert chosen.security.compliance_packs == ("AwsSolutions", "PCIDSS321")


KEY = "arn:aws:kms:us-east-1:123456789012:key/01234567-89ab-cdef-0123-456789abcdef"
BUCKETS = {
    f"{n}_bucket": f"kept-{n.replace('_', '-')}" for n in ("access_logs", "raw", "datasets", "checkpoints", "models")
}


def test_a_stage_adopts_what_an_earlier_deployment_retained():
    existing = load(
        {"storage": {"existing": {"kms_key_arn": KEY, "file_system_id": "fs-0123456789abcdef0", **BUCKETS}}}
    )
    assert existing.storage.existing.buckets["Raw"] == "kept-raw"
    assert load().storage.existing.buckets == dict.fromkeys(("AccessLogs", "Raw", "Datasets", "Checkpoints", "Models"))


@pytest.mark.parametrize(
    ("existing", "field", "hint"),
    [
        ({"file_system_id": "fs-0123abcd"}, "kms_key_arn", "it encrypts the adopted buckets and file system"),
        ({"kms_key_arn": KEY.replace("us-east-1", "eu-west-1")}, "kms_key_arn", "in the stage's account and region"),
        ({"kms_key_arn": KEY, "file_system_id": "0123abcd"}, "file_system_id", "an EFS file system id"),
        ({"kms_key_arn": KEY, **BUCKETS, "models_bucket": None}, "models_bucket", "all five retained buckets or none"),
        ({"kms_key_arn": KEY, **BUCKETS, "raw_bucket": "Kept_Raw"}, "raw_bucket", "an S3 bucket name"),
    ],
)
def test_adopting_names_the_field_and_the_fix(existing, field, hint):
    with pytest.raises(ConfigError) as error:
        load({"storage": {"existing": existing}})
    assert error.value.field == f"storage.existing.{field}"
    assert hint in str(error.value)


@pytest.mark.parametrize(
    ("zones", "hint"),
    [
        (["us-east-1a"], "2 distinct zones (network.max_azs)"),
        (["us-east-1a", "us-east-1a"], "2 distinct zones"),
        (["us-east-1a", "eu-west-1b"], "a zone of the stage's region, e.g. us-east-1a"),
    ],
)
def test_availability_zones_are_max_azs_zones_of_the_region(zones, hint):
    assert load({"network": {"availability_zones": ["us-east-1c", "us-east-1d"]}}).network.availability_zones
    with pytest.raises(ConfigError) as error:
        load({"network": {"availability_zones": zones}})
    assert error.value.field == "network.availability_zones" and hint in str(error.value)
