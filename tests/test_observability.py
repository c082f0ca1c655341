"""The synthesized observability: dashboard widgets and their SEARCH syntax, alarms, outputs (who is e-mailed
what: tests/test_operations.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from aws_cdk.assertions import Template

from infra.observability.search_expressions import MAX_QUERY, STATISTICS
from infra.plan_step.metric_definitions import METRIC_DEFINITIONS
from local.definition import resolve_value
from tests.synth import synth_template

SEARCH = re.compile(r"^SEARCH\('(?P<query>\{(?P<schema>[^{}]+)\}\s(?P<terms>.+))', '(?P<stat>\w+)', (?P<period>\d+)\)$")
SCHEMA_NAME = re.compile(r'^(?:[A-Za-z0-9]+|"(?:[^"\\]|\\.)+")$')
TERM = re.compile(r'^(?:[A-Za-z][A-Za-z0-9.]*=)?(?:"(?:[^"\\]|\\.)+"|[A-Za-z0-9][A-Za-z0-9-]*)$')


def check_search(expression: str) -> list[str]:
    """Problems with a SEARCH expression, by CloudWatch's syntax; empty when it is valid."""
    match = SEARCH.match(expression)
    if not match:
        return [f"not SEARCH('{{schema}} terms', 'stat', period): {expression}"]
    problems = []
    schema = re.findall(r'"(?:[^"\\]|\\.)+"|[^,]+', match["schema"])
    problems += [f"schema name {name!r} needs double quotes" for name in schema if not SCHEMA_NAME.match(name)]
    terms = re.findall(r'(?:\w+=)?"(?:[^"\\]|\\.)+"|\S+', match["terms"])
    problems += [f"term {term!r}" for term in terms if not TERM.match(term)]
    if match["stat"] not in STATISTICS:
        problems.append(f"statistic {match['stat']}")
    if int(match["period"]) % 60:
        problems.append(f"period {match['period']}")
    if len(match["query"]) > MAX_QUERY:
        problems.append("query too long")
    return problems


def test_the_checker_rejects_broken_searches():
    assert check_search("SEARCH('{\"/aws/x\",Host} MetricName=\"A\" Host=gpt-dev', 'Average', 60)") == []
    assert check_search("SEARCH('{/aws/x,Host} MetricName=\"A\"', 'Average', 60)")  # unquoted namespace
    assert check_search("SEARCH('{\"/aws/x\",Host} MetricName=\"A', 'Average', 60)")  # unbalanced quote
    assert check_search("SEARCH('{\"/aws/x\",Host} MetricName=\"A\"', 'Mean', 60)")  # no such statistic
    assert check_search("SEARCH('{\"/aws/x\",Host} MetricName=\"A\"', 'Average', 45)")  # period
    assert check_search("SEARCH('{\"/aws/x\",Host} MetricName=\"A\"', 'Average')")  # no period


def resources(template: dict, kind: str) -> dict:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


@pytest.fixture(scope="module")
def template() -> dict:
    return synth_template("dev")


@pytest.fixture(scope="module")
def widgets(template: dict) -> list[dict]:
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    return json.loads(resolve_value(dashboard["Properties"]["DashboardBody"], "us-east-1", "123456789012"))["widgets"]


def graphs(widgets: list[dict]) -> dict[str, list]:
    return {w["properties"]["title"]: w["properties"]["metrics"] for w in widgets if w["type"] == "metric"}


def searches(metrics: list) -> list[str]:
    return [m[0]["expression"] for m in metrics if isinstance(m[0], dict) and "SEARCH" in m[0].get("expression", "")]


def test_dashboard_has_the_workflow_host_progress_and_efs_charts(widgets: list[dict]):
    titles = set(graphs(widgets))
    assert {
        "Workflow executions (per 5 minutes)",
        "Execution duration (hours)",
        "Training: GPU utilization (% summed over the host's GPUs)",
        "Training: GPU memory (% summed over the host's GPUs)",
        "Training: CPU utilization (% summed over cores)",
        "Training: Host memory (%)",
        "Training: Disk (%)",
        "Processing: CPU utilization (% summed over cores)",
        "Processing: Host memory (%)",
        "Loss (train and validation)",
        "Validation bits per byte",
        "Tokens per second",
        "Learning rate",
        "Model FLOPs utilization (0-1)",
        "Step time: input wait, compute, sync (%)",
        "Gradient norm (before clipping)",
        "Peak device memory (%)",
        "Seconds since the last step",
        "Loss drop over the loss window (%)",
        "Steps skipped (non-finite gradient)",
        "Validation bits per byte, each source of a mix",
        "EFS throughput vs permitted",
        "EFS client connections",
        "EFS storage (GiB)",
    } == titles
    executions = graphs(widgets)["Workflow executions (per 5 minutes)"]
    assert [m[1] for m in executions] == [
        "ExecutionsStarted",
        "ExecutionsSucceeded",
        "ExecutionsFailed",
        "ExecutionsTimedOut",
        "ExecutionsAborted",
    ]
    assert any(w["type"] == "alarm" and len(w["properties"]["alarms"]) == 4 + 7 for w in widgets)  # + health


def test_every_search_is_valid_and_limited_to_this_stacks_jobs(widgets: list[dict]):
    expressions = [e for metrics in graphs(widgets).values() for e in searches(metrics)]
    assert len(expressions) == 22  # 5 training host, 2 processing host, 6 training-log + 8 health metrics, the sources
    for expression in expressions:
        assert check_search(expression) == [], expression
        assert re.search(r" (Host|TrainingJobName)=gpt-dev'", expression), expression


def test_host_charts_search_per_host_and_progress_charts_per_job(widgets: list[dict]):
    charts = graphs(widgets)
    gpu = searches(charts["Training: GPU utilization (% summed over the host's GPUs)"])
    assert gpu == [
        "SEARCH('{\"/aws/sagemaker/TrainingJobs\",Host} MetricName=\"GPUUtilization\" Host=gpt-dev', 'Average', 60)"
    ]
    assert '{"/aws/sagemaker/ProcessingJobs",Host}' in searches(charts["Processing: Host memory (%)"])[0]
    loss = searches(charts["Loss (train and validation)"])
    assert [re.search(r'MetricName="([^"]+)"', e)[1] for e in loss] == ["train:loss", "validation:loss"]
    defined = {d["Name"] for d in METRIC_DEFINITIONS}
    progress = ("Loss (train and validation)", "Validation bits per byte", "Tokens per second", "Learning rate")
    progress += ("Model FLOPs utilization (0-1)",)
    for title in (*progress, "Step time: input wait, compute, sync (%)", "Seconds since the last step"):
        for expression in searches(charts[title]):
            assert "TrainingJobName}" in expression
            assert re.search(r'MetricName="([^"]+)"', expression)[1] in defined


def test_efs_throughput_is_compared_with_permitted_throughput(widgets: list[dict]):
    metrics = graphs(widgets)["EFS throughput vs permitted"]
    expressions = {m[0]["expression"] for m in metrics if isinstance(m[0], dict)}
    assert expressions == {"io / PERIOD(io) / 1048576", "permitted / 1048576", "100 * (io / PERIOD(io)) / permitted"}
    raw = {m[1]: m[-1] for m in metrics if isinstance(m[0], str)}
    assert raw["MeteredIOBytes"]["id"] == "io" and raw["MeteredIOBytes"]["stat"] == "Sum"
    assert raw["PermittedThroughput"]["id"] == "permitted"


def test_text_widgets_say_what_healthy_looks_like(widgets: list[dict]):
    text = " ".join(w["properties"]["markdown"] for w in widgets if w["type"] == "text")
    assert "GPU utilization above 90% per GPU" in text
    assert "well below the permitted line" in text
    assert "CreateProcessingJob takes no Debugger profiling configuration" in text


def test_health_alarms_are_metrics_insights_queries_to_the_topic_that_ignore_missing_data(template: dict):
    topic = {"Ref": next(iter(resources(template, "AWS::SNS::Topic")))}
    health = {k: r["Properties"] for k, r in resources(template, "AWS::CloudWatch::Alarm").items() if "Health" in k}
    queries = {}
    for props in health.values():
        (query,) = props["Metrics"]
        queries[query["Label"]] = (query["Expression"], props["ComparisonOperator"], props["Threshold"])
        assert (query["Period"], query["ReturnData"]) == (300, True)
        assert props["AlarmActions"] == [topic] and props["TreatMissingData"] == "notBreaching"
    ns = '"/aws/sagemaker/TrainingJobs"'
    assert queries == {  # the dev stage: ml.g5.12xlarge, 4 GPUs a host; default thresholds
        "GpusUnderused": (f'SELECT MIN("GPUUtilization") FROM SCHEMA({ns}, Host)', "LessThanThreshold", 240),
        "InputBound": (
            f'SELECT MAX("health:input_wait_percent") FROM SCHEMA({ns}, TrainingJobName)',
            "GreaterThanThreshold",
            20,
        ),
        "LossNotDecreasing": (
            f'SELECT MIN("health:loss_drop_percent") FROM SCHEMA({ns}, TrainingJobName)',
            "LessThanThreshold",
            1,
        ),
        "StepsSkipped": (
            f'SELECT SUM("health:skipped_steps") FROM SCHEMA({ns}, TrainingJobName)',
            "GreaterThanThreshold",
            10,
        ),
        "TrainingStalled": (
            f'SELECT MAX("health:seconds_since_step") FROM SCHEMA({ns}, TrainingJobName)',
            "GreaterThanThreshold",
            1800,
        ),
        "DeviceMemoryNearFull": (
            f'SELECT MAX("health:memory_percent") FROM SCHEMA({ns}, TrainingJobName)',
            "GreaterThanThreshold",
            90,
        ),
        "HostMemoryNearFull": (f'SELECT MAX("MemoryUtilization") FROM SCHEMA({ns}, Host)', "GreaterThanThreshold", 90),
    }


def test_alarms_go_to_the_topic(template: dict):
    alarms = {
        r["Properties"].get("MetricName", "EFS"): r["Properties"]
        for k, r in resources(template, "AWS::CloudWatch::Alarm").items()
        if "Health" not in k
    }
    assert set(alarms) == {"ExecutionsFailed", "ExecutionsTimedOut", "EFS", "CapacityWaitHours"}
    topic = {"Ref": next(iter(resources(template, "AWS::SNS::Topic")))}
    for name, props in alarms.items():  # a failed execution e-mails once, from its NotifyFailure state
        assert props.get("AlarmActions") == (None if name.startswith("Executions") else [topic]), name
        assert props["TreatMissingData"] == ("breaching" if name == "CapacityWaitHours" else "notBreaching"), name
    for name in ("ExecutionsFailed", "ExecutionsTimedOut"):
        assert (alarms[name]["Namespace"], alarms[name]["Statistic"], alarms[name]["Threshold"]) == (
            "AWS/States",
            "Sum",
            1,
        )
        assert alarms[name]["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    efs = alarms["EFS"]
    assert (efs["Threshold"], efs["EvaluationPeriods"], efs["DatapointsToAlarm"]) == (80, 5, 5)
    assert efs["Metrics"][0]["Expression"] == "100 * (io / PERIOD(io)) / permitted"
    assert {m["MetricStat"]["Metric"]["MetricName"] for m in efs["Metrics"][1:]} == {
        "MeteredIOBytes",
        "PermittedThroughput",
    }


def test_a_job_waiting_for_capacity_past_the_stated_hours_or_a_silent_watchdog_e_mails_the_topic(template: dict):
    """The watchdog runs every 15 minutes with the stage's prefix; 30 minutes at or above 6 h of waiting (the
    default observability.capacity_wait_alarm_hours), or 30 minutes without its report, alarm to the topic."""
    (alarm,) = [r["Properties"] for k, r in resources(template, "AWS::CloudWatch::Alarm").items() if "Capacity" in k]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"], alarm["Period"]) == (
        "GptPretraining",
        "CapacityWaitHours",
        "Maximum",
        900,
    )
    assert alarm["Dimensions"] == [{"Name": "JobPrefix", "Value": "gpt-dev"}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (6, "GreaterThanOrEqualToThreshold")
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"], alarm["TreatMissingData"]) == (2, 2, "breaching")
    (rule,) = [r["Properties"] for k, r in resources(template, "AWS::Events::Rule").items() if "Capacity" in k]
    assert rule["ScheduleExpression"] == "rate(15 minutes)"
    (target,) = rule["Targets"]
    assert json.loads(target["Input"]) == {"job_prefix": "gpt-dev"}
    function = next(k for k in template["Resources"] if k.startswith("CapacityWatchFunction"))
    assert target["Arn"] == {"Fn::GetAtt": [function, "Arn"]}


def test_cloudwatch_may_publish_to_the_encrypted_topic_only_from_this_accounts_alarms(template: dict):
    (policy,) = resources(template, "AWS::SNS::TopicPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    cloudwatch = [s for s in statements if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert cloudwatch[0]["Condition"] == {
        "ArnLike": {"aws:SourceArn": "arn:aws:cloudwatch:us-east-1:123456789012:alarm:*"}
    }
    assert not [s for s in statements if s.get("Principal") == {"Service": "events.amazonaws.com"}]  # a role instead


def test_outputs_link_to_the_console(template: dict):
    outputs = template["Outputs"]
    for name in ("StateMachineConsole", "DashboardUrl", "WorkflowLogsConsole", "PlanLogsConsole"):
        assert "console.aws.amazon.com" in json.dumps(outputs[name]["Value"]), name
    assert outputs["TrainingJobLogs"]["Value"].endswith("TrainingJobs$3FlogStreamNameFilter$3Dgpt-dev-")
    assert outputs["ProcessingJobLogs"]["Value"].endswith("ProcessingJobs$3FlogStreamNameFilter$3Dgpt-dev-")


def test_stage_config_sets_log_level_execution_data_and_alarm_threshold(tmp_path_factory: pytest.TempPathFactory):
    override = Path(tmp_path_factory.mktemp("config")) / "observability.json"
    observability = {
        "state_machine_log_level": "ERROR",
        "log_execution_data": False,
        "efs_throughput_alarm_percent": 60,
    }
    override.write_text(json.dumps({"observability": observability}))
    template = Template.from_json(synth_template("dev", str(override)))
    template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": {"IncludeExecutionData": False, "Level": "ERROR"},
        },
    )
    template.has_resource_properties("AWS::CloudWatch::Alarm", {"Threshold": 60, "DatapointsToAlarm": 5})
