"""The health alarms' Metrics Insights queries, thresholds and periods, without synthesizing anything."""

from __future__ import annotations

import re

from aws_cdk import aws_cloudwatch as cw

from infra.config import ObservabilityConfig
from infra.observability.health_alarms import health_alarms
from infra.plan_step.metric_definitions import METRIC_DEFINITIONS

NS = '"/aws/sagemaker/TrainingJobs"'
# Metrics Insights as documented: one function over one metric FROM SCHEMA(namespace, dimensions), no GROUP BY
# (an alarm's query must return one time series); names with characters other than letters, digits and _ quoted.
QUERY = re.compile(r'^SELECT (AVG|MIN|MAX|SUM|COUNT)\("([^"]+)"\) FROM SCHEMA\("([^"]+)", (\w+)\)$')


def by_id(gpus: int = 8, **fields):
    return {a.id: a for a in health_alarms(ObservabilityConfig(**fields), gpus_per_host=gpus)}


def test_each_alarm_asks_its_question_with_one_query():
    alarms = by_id()
    assert {id: a.query for id, a in alarms.items()} == {
        "GpusUnderused": f'SELECT MIN("GPUUtilization") FROM SCHEMA({NS}, Host)',
        "InputBound": f'SELECT MAX("health:input_wait_percent") FROM SCHEMA({NS}, TrainingJobName)',
        "LossNotDecreasing": f'SELECT MIN("health:loss_drop_percent") FROM SCHEMA({NS}, TrainingJobName)',
        "StepsSkipped": f'SELECT SUM("health:skipped_steps") FROM SCHEMA({NS}, TrainingJobName)',
        "TrainingStalled": f'SELECT MAX("health:seconds_since_step") FROM SCHEMA({NS}, TrainingJobName)',
        "DeviceMemoryNearFull": f'SELECT MAX("health:memory_percent") FROM SCHEMA({NS}, TrainingJobName)',
        "HostMemoryNearFull": f'SELECT MAX("MemoryUtilization") FROM SCHEMA({NS}, Host)',
    }
    defined = {d["Name"] for d in METRIC_DEFINITIONS}
    instance = {"GPUUtilization", "MemoryUtilization"}  # SageMaker's own, per Host
    for alarm in alarms.values():
        _, metric, namespace, dimension = QUERY.match(alarm.query).groups()
        assert namespace == "/aws/sagemaker/TrainingJobs"
        assert metric in (instance if dimension == "Host" else defined)


def test_thresholds_come_from_the_configuration():
    alarms = by_id(gpus=4, gpu_underused_percent=50, input_bound_percent=30, stalled_minutes=20, alarm_minutes=12)
    assert alarms["GpusUnderused"].threshold == 200  # 50% x 4 GPUs: SageMaker sums a host's GPUs
    assert alarms["GpusUnderused"].comparison == cw.ComparisonOperator.LESS_THAN_THRESHOLD
    assert alarms["InputBound"].threshold == 30 and alarms["InputBound"].periods == 3  # 12 min -> 3 x 5 min
    assert alarms["TrainingStalled"].threshold == 20 * 60 and alarms["TrainingStalled"].periods == 1


def test_a_stage_without_gpus_has_no_gpu_alarm():
    assert "GpusUnderused" not in by_id(gpus=0)
