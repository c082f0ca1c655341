"""The SageMaker requests, checked field by field without synthesizing anything."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from infra.aws_limits import SAGEMAKER_MAX_RUN_HOURS
from infra.plan_step import debugger, processing_requests, requests
from infra.plan_step.execution_input import parse_input
from infra.plan_step.hyperparameters import planned_checkpoint_every
from infra.plan_step.metric_definitions import METRIC_DEFINITIONS
from infra.training_code import training_module
from tests.api_contract import validate


def training(settings, **fields):
    inp = parse_input({"training": fields}, settings.stage_config)
    return requests.training_job_request(settings, inp, "gpt-dev-run-abc123-trn", "run")


def observability(settings, **fields):
    """The settings with some ``observability`` values of the stage changed."""
    stage = {**settings.stage, "observability": {**settings.stage["observability"], **fields}}
    return dataclasses.replace(settings, stage=stage)


DEBUGGER_FIELDS = ("ProfilerConfig", "ProfilerRuleConfigurations", "DebugHookConfig", "DebugRuleConfigurations")


def test_training_reads_the_dataset_from_efs_read_only_inside_the_vpc(settings):
    request = training(settings)
    assert set(request) == set(requests.TRAINING_FIELDS) - set(DEBUGGER_FIELDS)  # Debugger off by default
    assert request["InputDataConfig"] == [
        {
            "ChannelName": "train",
            "DataSource": {
                "FileSystemDataSource": {
                    "FileSystemId": "fs-0123456789abcdef0",
                    "FileSystemType": "EFS",
                    "DirectoryPath": "/datasets/pile",
                    "FileSystemAccessMode": "ro",
                }
            },
            "InputMode": "File",
        }
    ]
    assert request["VpcConfig"] == {"SecurityGroupIds": ["sg-jobs"], "Subnets": ["subnet-a", "subnet-b"]}


def test_s3_data_source_uses_fast_file_mode(settings):
    (channel,) = training(settings, data_source="s3")["InputDataConfig"]
    assert channel["InputMode"] == "FastFile"
    assert channel["DataSource"]["S3DataSource"]["S3Uri"] == "s3://datasets-bucket/datasets/pile/"


def test_hyperparameters_are_json_encoded_as_the_sdk_does(settings):
    hps = training(settings)["HyperParameters"]
    assert all(isinstance(v, str) for v in hps.values())
    assert hps["model_preset"] == '"gpt3-125m"'
    assert hps["sagemaker_program"] == '"train.py"'
    assert hps["sagemaker_submit_directory"] == '"s3://cdk-assets/abc.gz"'
    assert hps["sagemaker_multi_worker_mirrored_strategy_enabled"] == "true"
    assert json.loads(hps["global_batch_tokens"]) == 524_288
    # dev trains 1e9 tokens at 524,288 a step: ceil(1907.3) = 1908 steps
    assert hps["max_steps"] == "1908"


def test_pipeline_settings_reach_train_py(settings):
    hps = training(settings)["HyperParameters"]
    assert (hps["model_parallel_degree"], hps["microbatches"]) == ("1", "0")  # no pipeline by default
    # Micro-batch 4: a pipeline runs without XLA, and 8 would not fit the A10G (its logits alone 15.6 GiB).
    hps = training(settings, model_parallel_degree=2, microbatches=2, micro_batch_size=4)["HyperParameters"]
    assert (hps["model_parallel_degree"], hps["microbatches"]) == ("2", "2")
    assert hps["engine"] == '"multi_worker"'  # one process per host drives its pipelines


def test_mpi_engine_sets_one_process_per_gpu_on_a_custom_image(settings):
    image = "111122223333.dkr.ecr.us-east-1.amazonaws.com/tf-horovod:2.11"
    stage = {**settings.stage, "training": {**settings.stage["training"], "image_uri": image}}
    request = training(dataclasses.replace(settings, stage=stage), data_parallel_engine="mpi")
    assert request["AlgorithmSpecification"]["TrainingImage"] == image
    hps = request["HyperParameters"]
    assert hps["sagemaker_mpi_enabled"] == "true"
    assert hps["sagemaker_mpi_num_of_processes_per_host"] == "4"  # ml.g5.12xlarge: 4 x A10G
    assert "sagemaker_multi_worker_mirrored_strategy_enabled" not in hps


def test_efa_hosts_get_awss_nccl_settings_as_valid_environment_entries(settings):
    request = training(settings, instance_type="ml.p4d.24xlarge", instance_count=2, micro_batch_size=4)
    env = request["Environment"]
    assert (env["FI_PROVIDER"], env["NCCL_PROTO"], env["FI_EFA_USE_DEVICE_RDMA"]) == ("efa", "simple", "1")
    assert (env["NCCL_DEBUG"], env["PYTHONUNBUFFERED"]) == ("INFO", "1")
    assert validate("sagemaker", "CreateTrainingJob", request) == []  # keys and values as botocore's model allows
    assert "FI_PROVIDER" not in training(settings)["Environment"]  # dev's ml.g5.12xlarge has no EFA


def test_inter_container_encryption_is_on_unless_the_stage_turns_it_off_with_a_reason(settings):
    assert training(settings)["EnableInterContainerTrafficEncryption"] is True
    reason = "one VPC per run, private subnets; 20% faster all-reduce measured on 8 hosts"
    security = {"inter_container_encryption": False, "inter_container_encryption_off_reason": reason}
    off = dataclasses.replace(settings, stage={**settings.stage, "security": security})
    assert training(off)["EnableInterContainerTrafficEncryption"] is False


def test_spot_training_may_wait_its_stated_hours_for_capacity_besides_running_and_checkpoints(settings):
    """MaxWait is the job's whole time, running and waiting (botocore's documentation of MaxWaitTimeInSeconds)."""
    request = training(settings, spot=True, max_run_hours=10)
    assert request["EnableManagedSpotTraining"] is True
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 36_000, "MaxWaitTimeInSeconds": (10 + 72) * 3600}
    waits_a_day = training(settings, spot=True, max_run_hours=10, spot_wait_hours=24)
    assert waits_a_day["StoppingCondition"]["MaxWaitTimeInSeconds"] == (10 + 24) * 3600
    assert request["CheckpointConfig"] == {"S3Uri": "s3://checkpoints-bucket/run/", "LocalPath": "/opt/ml/checkpoints"}
    on_demand = training(settings, spot=False, max_run_hours=10)
    assert on_demand["StoppingCondition"] == {"MaxRuntimeInSeconds": 36_000}


def test_each_job_state_waits_longer_than_its_job_may_take(settings):
    """A Task state that times out under a running job fails a run SageMaker would have finished."""
    longest = training(settings, spot=True, max_run_hours=SAGEMAKER_MAX_RUN_HOURS, spot_wait_hours=672)
    longest = longest["StoppingCondition"]
    assert longest["MaxWaitTimeInSeconds"] == 2 * longest["MaxRuntimeInSeconds"] == 2 * 672 * 3600
    upload = (30 - 28) * 24 * 3600  # a stopped job's upload: "30 days" in total, of which MaxRuntime is at most 28
    assert requests.TASK_TIMEOUT_SECONDS["training"] >= longest["MaxWaitTimeInSeconds"] + upload
    inp = parse_input({}, settings.stage_config)
    for kind, request in (
        ("tokenizer", processing_requests.tokenizer_job_request(settings, inp, "j-tok", {"": "s3://b/m"})),
        ("shards", processing_requests.shards_job_request(settings, inp, "j-shd")),
    ):
        assert requests.TASK_TIMEOUT_SECONDS[kind] > request["StoppingCondition"]["MaxRuntimeInSeconds"], kind


def test_volumes_outputs_and_traffic_are_encrypted(settings):
    request = training(settings)  # dev: ml.g5.12xlarge, local NVMe storage that its hardware encrypts
    key = settings.kms_key_arn
    assert "VolumeKmsKeyId" not in request["ResourceConfig"]
    assert request["OutputDataConfig"]["KmsKeyId"] == key
    assert request["EnableInterContainerTrafficEncryption"] is True
    assert request["AlgorithmSpecification"]["MetricDefinitions"] == METRIC_DEFINITIONS
    assert request["AlgorithmSpecification"]["TrainingImage"] == (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.21-gpu-py312"
    )
    ebs_only = training(settings, instance_type="ml.p3.16xlarge", precision="fp16", micro_batch_size=4)
    assert ebs_only["ResourceConfig"]["VolumeKmsKeyId"] == key


def test_volume_key_follows_the_sdk_for_every_job(settings):
    inp = parse_input({"preprocessing": {"instance_type": "ml.g5.xlarge"}}, settings.stage_config)
    cluster = processing_requests.shards_job_request(settings, inp, "x")["ProcessingResources"]["ClusterConfig"]
    assert "VolumeKmsKeyId" not in cluster
    inp = parse_input({"deploy": {"instance_type": "ml.m5.xlarge"}}, settings.stage_config)
    assert requests.endpoint_config_request(settings, inp, "c", "m")["KmsKeyId"] == settings.kms_key_arn


def test_hosting_requests_point_at_the_training_jobs_artifact(settings):
    inp = parse_input({"deploy": True}, settings.stage_config)
    model = requests.model_request(settings, inp, "m", "gpt-dev-run-abc123-trn")
    assert model["PrimaryContainer"]["ModelDataUrl"] == (
        "s3://models-bucket/training/gpt-dev-run-abc123-trn/output/model.tar.gz"
    )
    config = requests.endpoint_config_request(settings, inp, "c", "m")
    assert config["ProductionVariants"][0]["ModelName"] == "m"
    assert "KmsKeyId" not in config  # ml.g5.xlarge: local NVMe storage, encrypted by the instance
    assert set(requests.endpoint_request(settings, "e", "c")) == set(requests.ENDPOINT_FIELDS)


def test_debugger_off_by_default_leaves_every_debugger_field_out(settings):
    request = training(settings)
    assert settings.stage_config.observability.debugger is False
    assert not set(DEBUGGER_FIELDS) & set(request)
    assert not [field for field in request if "Debug" in field or "Profiler" in field]


def test_debugger_on_adds_exactly_the_debugger_fields_of_before_and_changes_nothing_else(settings):
    off, on = training(settings), training(observability(settings, debugger=True))
    added = {field: on[field] for field in set(on) - set(off)}
    assert {field: value for field, value in on.items() if field not in added} == off
    assert sorted(added) == ["ProfilerConfig", "ProfilerRuleConfigurations"]  # and no tensor rules: no smdebug in 2.21
    # The values the request carried before the switch existed (commit af49789), written out; since then each
    # rule's parameters are the SageMaker SDK's (rule_to_invoke plus its thresholds, infra/sdk_tables.py).
    image, parameters = settings.rule_evaluator_image, settings.profiler_rule_parameters
    rules = ("ProfilerReport", "LowGPUUtilization", "GPUMemoryIncrease", "CPUBottleneck", "IOBottleneck")
    assert added == {
        "ProfilerConfig": {"S3OutputPath": "s3://models-bucket/training/", "ProfilingIntervalInMilliseconds": 500},
        "ProfilerRuleConfigurations": [
            {"RuleConfigurationName": rule, "RuleEvaluatorImage": image, "RuleParameters": parameters[rule]}
            for rule in (*rules, "BatchSize", "LoadBalancing")
        ],
    }
    assert all(parameters[rule]["rule_to_invoke"] == rule for rule in (*rules, "BatchSize", "LoadBalancing"))


def test_tensorboard_output_is_uploaded_next_to_the_model_with_the_report(settings):
    request = training(settings)
    assert request["TensorBoardOutputConfig"] == {
        "S3OutputPath": "s3://models-bucket/training/gpt-dev-run-abc123-trn/tensorboard/",
        "LocalPath": "/opt/ml/output/tensorboard",
    }
    assert requests.training_report_uri(settings, "gpt-dev-run-abc123-trn") == (
        "s3://models-bucket/training/gpt-dev-run-abc123-trn/tensorboard/training-report.html"
    )
    hps = request["HyperParameters"]
    assert json.loads(hps["tensorboard_dir"]) == "/opt/ml/output/tensorboard"
    assert (hps["profile_start"], hps["profile_steps"]) == ("20", "5")


def test_health_rule_thresholds_reach_train_py_from_the_stage(settings):
    hps = training(observability(settings, input_bound_percent=35))["HyperParameters"]
    rules = json.loads(json.loads(hps["health_rules"]))
    assert rules["input_bound_percent"] == 35 and rules["stalled_minutes"] == 30
    assert len(hps["health_rules"]) <= 2500  # SageMaker's limit on a hyperparameter value


def test_training_profiles_every_instance_and_runs_the_profiler_rules(settings):
    request = training(observability(settings, debugger=True))
    output = request["OutputDataConfig"]["S3OutputPath"]
    assert output == "s3://models-bucket/training/"
    assert request["ProfilerConfig"] == {"S3OutputPath": output, "ProfilingIntervalInMilliseconds": 500}
    rules = request["ProfilerRuleConfigurations"]
    assert [r["RuleConfigurationName"] for r in rules] == list(debugger.PROFILER_RULES)
    assert {r["RuleEvaluatorImage"] for r in rules} == {settings.rule_evaluator_image}
    # The TF 2.21 image has no smdebug hook: no tensor rules, no hook configuration.
    assert "DebugRuleConfigurations" not in request
    assert "DebugHookConfig" not in request


def test_profiling_interval_comes_from_the_stage(settings):
    request = training(observability(settings, debugger=True, profiling_interval_ms=100))
    assert request["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] == 100


def test_profiler_report_link_points_where_the_report_rule_writes(settings):
    request = training(observability(settings, debugger=True))
    (report_rule,) = [
        r for r in request["ProfilerRuleConfigurations"] if r["RuleConfigurationName"] == "ProfilerReport"
    ]
    expected = (
        f"{request['ProfilerConfig']['S3OutputPath']}{request['TrainingJobName']}/rule-output/"
        f"{report_rule['RuleConfigurationName']}/profiler-output/profiler-report.html"
    )
    assert requests.profiler_report_uri(settings, request["TrainingJobName"]) == expected


def test_the_report_link_names_the_file_train_py_writes():
    source = (Path(__file__).parents[2] / "training" / "observe" / "report.py").read_text()
    assert f'REPORT_FILE = "{requests.REPORT_FILE}"' in source


def test_the_training_request_round_trips_through_train_pys_own_parser(settings):
    hparams = training_module("hparams")
    shape = {"model_preset": "gpt3-125m", "n_layer": 4, "d_model": 256, "n_head": 4}
    inp = parse_input({"training": shape, "hyperparameters": {"warmup_steps": 7}}, settings.stage_config)
    hps = requests.training_job_request(settings, inp, "gpt-dev-run-abc123-trn", "run")["HyperParameters"]
    as_sm_hps = hparams.parse_args([], {"SM_HPS": json.dumps(hps)})
    as_argv = hparams.parse_args([arg for name, text in hps.items() for arg in (f"--{name}", text)], {})
    for args in (as_sm_hps, as_argv):
        assert (args.model_preset, args.n_layer, args.d_model, args.n_head) == ("gpt3-125m", 4, 256, 4)
        # recompute unset: the least that fits, none for 4 layers x 256
        assert (args.warmup_steps, args.engine, args.recompute) == (7, "multi_worker", "none")
        assert args.max_steps == 1_000_000_000 // 524_288 + 1  # ceil(train_tokens / global_batch_tokens)
        assert sorted(args.ignored) == sorted(f"--{n}" for n in hps if hparams.is_reserved(n))


def test_on_gpus_checkpoint_every_bounds_a_reclaims_loss_unless_the_input_sets_it():
    """Issue 41: the request's interval is the estimate's for 5% of an hour (prod: 65 steps of 2.76 s, modelled)."""
    from infra.config import TrainingConfig

    prod = TrainingConfig(model_preset="gpt3-1.3b", global_batch_tokens=1_048_576, micro_batch_size=4, instance_count=4)
    assert planned_checkpoint_every(prod, 50_257) == {"checkpoint_every": 65}
    assert planned_checkpoint_every(TrainingConfig(instance_type="ml.m5.xlarge", precision="fp32"), 4096) == {}


SMALL = {"model_preset": "gpt3-125m", "n_layer": 4, "d_model": 256, "n_head": 4}


@pytest.mark.parametrize(
    ("training", "sent"),
    [
        ({"model_preset": "gpt3-125m"}, "attention"),  # unset: the least that fits (dev: ml.g5.12xlarge, 8 x 2048)
        ({"model_preset": "gpt3-125m", "recompute": True}, "full"),
        (SMALL | {"recompute": False}, "none"),
        (SMALL | {"recompute": "mlp"}, "mlp"),
    ],
)
def test_the_request_carries_the_given_recompute_or_the_least_that_fits(settings, training, sent):
    inp = parse_input({"training": training}, settings.stage_config)
    hps = requests.training_job_request(settings, inp, "gpt-dev-run-abc123-trn", "run")["HyperParameters"]
    assert training_module("hparams").parse_args([], {"SM_HPS": json.dumps(hps)}).recompute == sent
