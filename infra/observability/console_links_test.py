"""Console links: the console's fragment encoding, and CDK tokens passed through for deploy time."""

from __future__ import annotations

import aws_cdk as cdk

from infra.observability import console_links


def test_log_group_link_double_encodes_slashes_and_filters_streams_by_prefix():
    assert console_links.log_group_url("eu-west-1", "/aws/sagemaker/TrainingJobs", "gpt-dev-") == (
        "https://eu-west-1.console.aws.amazon.com/cloudwatch/home?region=eu-west-1"
        "#logsV2:log-groups/log-group/$252Faws$252Fsagemaker$252FTrainingJobs$3FlogStreamNameFilter$3Dgpt-dev-"
    )


def test_tokens_are_left_for_cloudformation_to_resolve():
    stack = cdk.Stack()
    name = cdk.Token.as_string(cdk.Fn.ref("WorkflowLogs"))
    url = console_links.log_group_url("us-east-1", name)
    assert url.endswith(f"log-group/{name}")
    assert stack.resolve(url) == {
        "Fn::Join": [
            "",
            [
                "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#logsV2:log-groups/log-group/",
                {"Ref": "WorkflowLogs"},
            ],
        ]
    }


def test_state_machine_and_dashboard_links():
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:m"
    assert console_links.state_machine_url("us-east-1", arn) == (
        f"https://us-east-1.console.aws.amazon.com/states/home?region=us-east-1#/statemachines/view/{arn}"
    )
    assert console_links.dashboard_url("us-east-1", "GptPretraining-dev").endswith(
        "/cloudwatch/home?region=us-east-1#dashboards/dashboard/GptPretraining-dev"
    )
