"""The table of Task resources: each answer's shape is one botocore knows, and trimming keeps what the states read."""

from __future__ import annotations

import botocore.session
import pytest

from local.tasks import SDK, SNS_PUBLISH, TASKS, required_members_only

ANSWER_NOTHING = {"DeleteEndpointConfig", "DeleteModel"}  # botocore's model gives them no output shape


@pytest.mark.parametrize("resource", sorted(TASKS))
def test_each_task_names_an_operation_with_an_output_shape_or_one_that_answers_nothing(resource: str):
    task = TASKS[resource]
    model = botocore.session.get_session().get_service_model(task.service)
    shape = model.operation_model(task.operation).output_shape
    assert (shape is None) == (task.operation in ANSWER_NOTHING), task.operation
    if shape is None:
        assert required_members_only(resource, {}) == {}


def test_required_members_only_drops_optional_members_and_keeps_what_a_poll_reads():
    answer = {"TaskExecutionArn": "arn:e", "Status": "SUCCESS", "Result": {"TransferStatus": "SUCCESS"}}
    trimmed = required_members_only(f"{SDK}datasync:describeTaskExecution", answer)
    assert trimmed == {"TaskExecutionArn": "arn:e", "Status": "SUCCESS"}


def test_required_members_only_leaves_a_publish_and_an_unknown_resource_whole():
    assert required_members_only(SNS_PUBLISH, {"MessageId": "m"}) == {"MessageId": "m"}
    assert required_members_only("arn:aws:lambda:us-east-1:0:function:plan", {"a": 1}) == {"a": 1}
