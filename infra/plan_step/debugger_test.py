"""Debugger's profiling and rule settings, checked without synthesizing anything."""

from __future__ import annotations

import pytest

from infra.plan_step import debugger
from infra.sdk_tables import profiler_rule_parameters, rule_evaluator_image

IMAGE = rule_evaluator_image("us-east-1")
PARAMETERS = profiler_rule_parameters(debugger.PROFILER_RULES)


def test_profiler_rules_are_the_system_rules_each_invoking_itself_with_the_sdk_parameters():
    rules = debugger.profiler_rule_configurations(IMAGE, profiler_rule_parameters(debugger.PROFILER_RULES))
    # One configuration per rule of the table, each a built-in of the SDK's rule_configs (profiler_rule_parameters
    # looks each up there); ProfilerReport first: its HTML report summarizes the others.
    assert [r["RuleConfigurationName"] for r in rules] == list(debugger.PROFILER_RULES) == list(PARAMETERS)
    assert rules[0]["RuleConfigurationName"] == "ProfilerReport"
    for rule in rules:
        assert rule["RuleEvaluatorImage"] == IMAGE
        assert rule["RuleParameters"]["rule_to_invoke"] == rule["RuleConfigurationName"]
    assert len(rules) <= 20  # SageMaker's limit per job


@pytest.mark.parametrize(
    ("version", "has_hook"),
    [("2.21.0", False), ("2.16.1", False), ("2.15.0", True), ("2.11.0", True), ("1.15.5", True), ("3.0.0", False)],
)
def test_only_images_up_to_tensorflow_2_15_have_the_smdebug_hook(version, has_hook):
    assert debugger.image_has_smdebug_hook(version) is has_hook


def test_tensor_rules_are_left_out_for_an_image_without_smdebug():
    assert debugger.tensor_rule_fields("2.21.0", "s3://b/training/", IMAGE) == {}


def test_tensor_rules_and_the_hook_that_feeds_them_for_an_image_with_smdebug():
    fields = debugger.tensor_rule_fields("2.13.0", "s3://b/training/", IMAGE)
    assert tuple(fields) == ("DebugHookConfig", "DebugRuleConfigurations")
    assert fields["DebugHookConfig"] == {
        "S3OutputPath": "s3://b/training/",
        "CollectionConfigurations": [
            {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}},
            {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}},
        ],
    }
    rules = fields["DebugRuleConfigurations"]
    assert [r["RuleConfigurationName"] for r in rules] == ["LossNotDecreasing", "VanishingGradient", "ExplodingTensor"]
    assert {r["RuleEvaluatorImage"] for r in rules} == {IMAGE}


def test_profiler_config_and_report_location_share_the_job_output_folder():
    assert debugger.profiler_config("s3://b/training/", 200) == {
        "S3OutputPath": "s3://b/training/",
        "ProfilingIntervalInMilliseconds": 200,
    }
    assert debugger.profiler_report_uri("s3://b/training/", "job-trn") == (
        "s3://b/training/job-trn/rule-output/ProfilerReport/profiler-output/profiler-report.html"
    )


def test_debugger_off_gives_no_field_and_on_gives_profiling_rules_and_for_old_images_tensor_rules():
    assert debugger.debugger_fields(False, "2.13.0", "s3://b/training/", 500, IMAGE, PARAMETERS) == {}
    on = debugger.debugger_fields(True, "2.21.0", "s3://b/training/", 500, IMAGE, PARAMETERS)
    assert tuple(on) == ("ProfilerConfig", "ProfilerRuleConfigurations")
    old = debugger.debugger_fields(True, "2.13.0", "s3://b/training/", 500, IMAGE, PARAMETERS)
    assert tuple(old) == ("ProfilerConfig", "ProfilerRuleConfigurations", "DebugHookConfig", "DebugRuleConfigurations")
    assert {"DebugHookConfig", "DebugRuleConfigurations"} <= set(old)
