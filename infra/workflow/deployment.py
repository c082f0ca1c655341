"""The Deploy step: the stage's one endpoint, created by the first deploying execution and updated in place by
every later one, the configuration and model it served before removed; so each run leaves one endpoint billing,
not one more.

CreateModel -> CreateEndpointConfig -> FindEndpoint: DescribeEndpoint of the stage's endpoint (``$.plan.names.
endpoint``). None yet (SageMaker answers ValidationException, SageMaker.SageMakerException, which is also its
throttling's name: tried five more times first) -> CreateEndpoint and wait until it is in service. In service ->
UpdateEndpoint (SageMaker's blue/green update: the old instances serve until the new ones do, and go on serving
when the new ones fail, the update rolled back) and wait until it serves the new configuration; then delete the
configuration it served before and that configuration's model. An endpoint in any other status (another update
under way, Failed) is left as it is and the execution fails naming it (docs/runbook.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_stepfunctions as sfn

from infra.workflow.permissions import sagemaker_arn

if TYPE_CHECKING:
    from infra.workflow.state_machine import Workflow

CURRENT = "$.deployment.current"  # the endpoint as FindEndpoint described it, before this execution's change
STATUS = "$.deployment.status"  # the endpoint as the last poll described it
NEW_CONFIG = "$.plan.names.endpoint_config"
NOT_FOUND = ["SageMaker.SageMakerException"]  # DescribeEndpoint's "Could not find endpoint" (errors.py)


def deployment(wf: Workflow, prefix: str, then: sfn.IChainable) -> sfn.IChainable:
    """The chain from CreateModel to ``then`` (and to the failure notification)."""
    model = wf.sagemaker_job("CreateModel", "createModel", "model", sync=False, result_path="$.deployment.model")
    config = wf.sagemaker_job(
        "CreateEndpointConfig",
        "createEndpointConfig",
        "endpoint_config",
        sync=False,
        result_path="$.deployment.endpoint_config",
    )
    endpoints = [sagemaker_arn(prefix, "endpoint")]
    find = _describe_endpoint(wf, "FindEndpoint", prefix, CURRENT, catch=(NOT_FOUND, _create(wf, endpoints, then)))
    busy = _failure(
        wf,
        "EndpointNotInService",
        "Endpoint.NotInService",
        "The stage's endpoint {} is {}, not InService: nothing was changed. Let an update under way finish, or "
        "delete a failed endpoint (python -m cli endpoints --delete), then deploy this model with deploy_from.",
        sfn.JsonPath.string_at("$.plan.names.endpoint"),
        sfn.JsonPath.string_at(f"{CURRENT}.EndpointStatus"),
    )
    updatable = (
        sfn.Choice(wf, "Endpoint updatable?")
        .when(_reads(f"{CURRENT}.EndpointStatus", "InService"), _update(wf, prefix, then))
        .otherwise(busy)
    )
    return model.next(config).next(find).next(updatable)


def _create(wf: Workflow, endpoints: list[str], then: sfn.IChainable) -> sfn.IChainable:
    """The stage's first endpoint: create it, then wait until it is in service."""
    create = wf.sagemaker_job(
        "CreateEndpoint", "createEndpoint", "endpoint", sync=False, result_path="$.deployment.endpoint"
    )
    poll = wf.poll(
        "Endpoint",
        "Endpoint in service?",
        describe=("DescribeEndpoint", "sagemaker", "describeEndpoint"),
        parameters={"EndpointName": sfn.JsonPath.string_at("$.plan.names.endpoint")},
        iam_resources=endpoints,
        description=STATUS,  # FailureReason is an optional member
        seconds=60,
        status="EndpointStatus",
        done=("InService", then),
        failed=("Failed", "Endpoint.Failed"),
    )
    return create.next(poll)


def _update(wf: Workflow, prefix: str, then: sfn.IChainable) -> sfn.IChainable:
    """UpdateEndpoint, then wait until the endpoint serves the new configuration; then remove the old one."""
    update = wf.sagemaker_job(
        "UpdateEndpoint", "updateEndpoint", "endpoint_update", sync=False, result_path="$.deployment.endpoint"
    )
    wait = sfn.Wait(wf, "WaitForEndpointUpdate", time=sfn.WaitTime.duration(cdk.Duration.seconds(60)))
    describe = _describe_endpoint(wf, "DescribeUpdatedEndpoint", prefix, STATUS)
    serving, config = _reads(f"{STATUS}.EndpointStatus", "InService"), f"{STATUS}.EndpointConfigName"
    known = sfn.Condition.is_present(config)
    rolled_back = _failure(
        wf,
        "EndpointUpdateRolledBack",
        "Endpoint.UpdateRolledBack",
        "SageMaker rolled the update of {} back: it still serves {} (the model before). Why: {}",
        sfn.JsonPath.string_at("$.plan.names.endpoint"),
        sfn.JsonPath.string_at(config),
        sfn.JsonPath.json_to_string(sfn.JsonPath.object_at(STATUS)),
    )
    failed = _failure(
        wf,
        "EndpointUpdateFailed",
        "Endpoint.Failed",
        "The endpoint {} failed while updating: {}",
        sfn.JsonPath.string_at("$.plan.names.endpoint"),
        sfn.JsonPath.json_to_string(sfn.JsonPath.object_at(STATUS)),
    )
    choice = (
        sfn.Choice(wf, "Endpoint updated?")
        .when(
            sfn.Condition.and_(serving, known, sfn.Condition.string_equals_json_path(config, NEW_CONFIG)),
            _remove_old(wf, prefix, then),
        )
        .when(sfn.Condition.and_(serving, known), rolled_back)
        .when(serving, then)  # the description names no configuration: the old one is kept, never guessed at
        .when(_reads(f"{STATUS}.EndpointStatus", "Failed"), failed)
        .otherwise(wait)
    )
    return update.next(wait).next(describe).next(choice)


def _remove_old(wf: Workflow, prefix: str, then: sfn.IChainable) -> sfn.IChainable:
    """The configuration the endpoint served before, and its model: nothing serves them any more."""
    old_config, old_model = f"{CURRENT}.EndpointConfigName", "$.deployment.old_config.ProductionVariants[0].ModelName"
    describe, delete_config, delete_model = (
        _call(wf, id, action, prefix, kind, {member: sfn.JsonPath.string_at(path)}, result_path)
        for id, action, kind, member, path, result_path in (
            ("DescribeOldEndpointConfig", "describeEndpointConfig", "endpoint-config", "EndpointConfigName",
             old_config, "$.deployment.old_config"),
            ("DeleteOldEndpointConfig", "deleteEndpointConfig", "endpoint-config", "EndpointConfigName",
             old_config, sfn.JsonPath.DISCARD),
            ("DeleteOldModel", "deleteModel", "model", "ModelName", old_model, sfn.JsonPath.DISCARD),
        )
    )  # fmt: skip
    model_known = sfn.Choice(wf, "Old model known?").when(sfn.Condition.is_present(old_model), delete_model.next(then))
    return (
        sfn.Choice(wf, "Old configuration known?")
        .when(sfn.Condition.is_present(old_config), describe.next(delete_config).next(model_known.otherwise(then)))
        .otherwise(then)
    )


def _describe_endpoint(
    wf: Workflow, id: str, prefix: str, result_path: str, catch: tuple[list[str], sfn.IChainable] | None = None
) -> sfn.IChainable:
    """DescribeEndpoint of the stage's endpoint, its answer at ``result_path``."""
    name = {"EndpointName": sfn.JsonPath.string_at("$.plan.names.endpoint")}
    return _call(wf, id, "describeEndpoint", prefix, "endpoint", name, result_path, catch)


def _call(
    wf: Workflow,
    id: str,
    action: str,
    prefix: str,
    kind: str,
    parameters: dict,
    result_path: str,
    catch: tuple[list[str], sfn.IChainable] | None = None,
) -> sfn.IChainable:
    """SageMaker's ``action`` on this stage's resources of ``kind`` (``endpoint-config`` ...)."""
    resources = [sagemaker_arn(prefix, kind)]
    return wf.sdk_call(
        id, "sagemaker", action, parameters=parameters, iam_resources=resources, result_path=result_path, catch=catch
    )


def _failure(wf: Workflow, id: str, error: str, text: str, *paths: str) -> sfn.IChainable:
    """A Pass that sets ``$.error`` to ``error`` and ``text`` filled in, then the failure notification."""
    cause = sfn.JsonPath.format(text, *paths)
    return sfn.Pass(wf, id, result_path="$.error", parameters={"Error": error, "Cause": cause}).next(wf.notify_failure)


def _reads(path: str, value: str) -> sfn.Condition:
    """``path`` is present and equals ``value`` (comparing an absent path raises States.Runtime)."""
    return sfn.Condition.and_(sfn.Condition.is_present(path), sfn.Condition.string_equals(path, value))
