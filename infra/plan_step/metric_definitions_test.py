"""The metric definitions within SageMaker's limits (training/observe/metrics_test.py parses the chief's lines)."""

from infra.plan_step.metric_definitions import METRIC_DEFINITIONS


def test_sagemaker_limits():
    assert len(METRIC_DEFINITIONS) <= 40
    assert all(len(d["Regex"]) <= 500 and len(d["Name"]) <= 255 for d in METRIC_DEFINITIONS)
