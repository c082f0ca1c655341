"""The Step Functions state machine: Plan, Preprocess, Stage to EFS, Train, Deploy, Notify.

Every SageMaker request comes whole from the Plan step (``$.plan.requests``); the states only decide
the path and wait. aws-cdk-lib's SageMaker tasks cannot express most of the training request (EFS
channels, checkpoints, spot, profiler...) and there is no processing-job task, so those states are
``CustomState`` with the IAM the ``.sync`` integrations need written out in ``permissions.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from aws_cdk.aws_datasync import CfnTask
from constructs import Construct

from infra.nag import acknowledge
from infra.plan_step import requests
from infra.workflow import messages
from infra.workflow.deployment import deployment
from infra.workflow.errors import operation_name, optimized_error, sdk_error
from infra.workflow.permissions import grant_sagemaker_jobs

# Throttling, an internal error, the service unavailable: the codes AWS means to be tried again (its common errors).
TRANSIENT_CODES = ("ThrottlingException", "InternalException", "ServiceUnavailable")
# DescribeTrainingJob's optional members that the success notification reports, with what it says without them.
# A JSONPath that finds nothing raises States.Runtime, which no Catch catches: absent members must be harmless.
TRAINING_RESULT_DEFAULTS = {
    "FinalMetricDataList": [],
    "TrainingTimeInSeconds": "unknown",
    "BillableTimeInSeconds": "unknown",
}


class Workflow(Construct):
    """The state machine users start with a JSON input (see docs/workflow.md), and its role.

    Args:
        plan_function: the Plan step's function.
        job_prefix: the prefix of every SageMaker name; IAM is scoped to it.
        execution_role_arn: the role SageMaker jobs run as (the only role the state machine may pass).
        datasync_task: the task that stages datasets to EFS.
        key: the data key, which endpoint configurations name (CreateEndpoint creates a grant on it).
        topic: where success and failure are announced.
        log_group: the state machine's execution log.
        log_level: ``ALL`` or ``ERROR``.
        include_execution_data: log each state's input and output too (default true).
        debugger: training jobs carry Debugger's fields and the success message links its report (default false).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan_function: lambda_.IFunction,
        job_prefix: str,
        execution_role_arn: str,
        datasync_task: CfnTask,
        key: kms.IKey,
        topic: sns.ITopic,
        log_group: logs.ILogGroup,
        log_level: str = "ALL",
        include_execution_data: bool = True,
        debugger: bool = False,
    ) -> None:
        super().__init__(scope, id)
        self._prefix = job_prefix
        self._datasync_task_arn = datasync_task.attr_task_arn
        self.notify_failure = messages.notify_failure(self, topic)
        definition = self._definition(plan_function, topic, debugger)
        self.state_machine = self._state_machine(definition, log_group, log_level, include_execution_data)
        grant_sagemaker_jobs(
            self.state_machine.role,
            job_prefix=job_prefix,
            execution_role_arn=execution_role_arn,
            key=key,
            datasync_task=datasync_task,
            plan_function=plan_function,
        )

    # ---- The path, in the order it runs ---------------------------------------------------------------

    def _definition(self, plan_function: lambda_.IFunction, topic: sns.ITopic, debugger: bool) -> sfn.IChainable:
        """Plan -> Preprocess? -> Stage to EFS? -> Train? -> Deploy? -> NotifySuccess. Each question's yes runs its
        steps, its no skips them (Train?'s no: the model of ``deploy_from``); a failure anywhere goes to
        NotifyFailure."""
        # The state each step starts with, then the path between them. CDK lists the definition's States in the
        # order it walks the graph from Plan, a state's incoming edges first in the order they were added: moving
        # these lines reorders the template's DefinitionString (the same machine, yet an updated resource).
        plan = self._plan(plan_function)
        preprocess = sfn.Choice(self, "Preprocess?")
        stage = sfn.Choice(self, "Stage to EFS?")
        train = self.sagemaker_job(
            "Train",
            "createTrainingJob",
            "training",
            result_selector={"Defaults": TRAINING_RESULT_DEFAULTS, "Job.$": "$"},
        )
        deploy = sfn.Choice(self, "Deploy?")
        notify_success = messages.notify_success(self, topic, debugger, self.notify_failure)
        trains = sfn.Choice(self, "Train?")
        # deploy_from: the model an earlier job trained, described as TrainingResult describes a job's.
        earlier = sfn.Pass(
            self, "TrainedEarlier", parameters={"Job.$": "$.plan.trained_earlier"}, result_path="$.training"
        )

        plan.next(preprocess)
        preprocess.when(_is_true("$.plan.preprocess.run"), self._preprocessing(then=stage)).otherwise(stage)
        stage.when(_is_true("$.plan.stage_to_efs"), self._staging(then=trains)).otherwise(trains)
        trains.when(_is_true("$.plan.train"), train).otherwise(earlier)
        train.next(self._training_result()).next(deploy)
        earlier.next(deploy)
        deploy.when(_is_true("$.plan.deploy"), deployment(self, self._prefix, notify_success)).otherwise(notify_success)
        return plan

    def _plan(self, function: lambda_.IFunction) -> tasks.LambdaInvoke:
        """The Plan step: the execution input and name in, ``$.plan`` out; a bad input's message to the e-mail."""
        plan = tasks.LambdaInvoke(
            self,
            "Plan",
            lambda_function=function,
            payload_response_only=True,
            result_path="$.plan",
            payload=sfn.TaskInput.from_object(
                {"input": sfn.JsonPath.object_at("$"), "execution_name": sfn.JsonPath.execution_name}
            ),
            retry_on_service_exceptions=True,
        )
        # Throttled beyond its reserved concurrency (security.plan_reserved_concurrency): wait and try again.
        plan.add_retry(errors=["Lambda.TooManyRequestsException"], interval=cdk.Duration.seconds(2), max_attempts=6)
        # A bad input (InputError) fails with the Lambda runtime's JSON as the cause: its errorMessage, errorType
        # and stackTrace. The e-mail gets the message alone; any other failure keeps its trace (a bug's).
        read = sfn.Pass(
            self,
            "ReadPlanError",
            parameters={"Error.$": "$.error.Error", "Detail.$": "States.StringToJson($.error.Cause)"},
            result_path="$.error",
        )
        message = sfn.Pass(
            self,
            "PlanErrorMessage",
            parameters={"Error.$": "$.error.Error", "Cause.$": "$.error.Detail.errorMessage"},
            result_path="$.error",
        )
        plan.add_catch(read.next(message).next(self.notify_failure), errors=["InputError"], result_path="$.error")
        plan.add_catch(self.notify_failure, result_path="$.error")
        return plan

    def _preprocessing(self, then: sfn.IChainable) -> sfn.IChainable:
        """Train tokenizer? -> TrainTokenizer -> WriteShards -> ``then``; a given tokenizer goes to WriteShards."""
        tokenizer = self.sagemaker_job("TrainTokenizer", "createProcessingJob", "tokenizer")
        shards = self.sagemaker_job("WriteShards", "createProcessingJob", "shards")
        tokenizer.next(shards).next(then)
        return (
            sfn.Choice(self, "Train tokenizer?")
            .when(_is_true("$.plan.preprocess.train_tokenizer"), tokenizer)
            .otherwise(shards)
        )

    def _staging(self, then: sfn.IChainable) -> sfn.IChainable:
        """DataSync has no .sync integration: start the task, then poll every 30 s until it ends; then ``then``."""
        start = self.sdk_call(
            "StartDataSync",
            "datasync",
            "startTaskExecution",
            parameters={
                "TaskArn": self._datasync_task_arn,
                "Includes": [
                    {"FilterType": "SIMPLE_PATTERN", "Value": sfn.JsonPath.string_at("$.plan.datasync_include")}
                ],
            },
            iam_resources=[self._datasync_task_arn],
            result_path="$.datasync",
        )
        poll = self.poll(
            "DataSync",
            "DataSync done?",
            describe=("DescribeDataSync", "datasync", "describeTaskExecution"),
            parameters={"TaskExecutionArn": sfn.JsonPath.string_at("$.datasync.TaskExecutionArn")},
            iam_resources=[f"{self._datasync_task_arn}/execution/*"],
            description="$.datasync_status",  # Status and Result are optional members
            seconds=30,
            status="Status",
            done=("SUCCESS", then),
            failed=("ERROR", "DataSync.Failed"),
        )
        # TaskExecutionArn is optional in the API model: without it there is nothing to poll, which is a failure.
        no_execution = sfn.Pass(
            self,
            "DataSyncNotStarted",
            result_path="$.error",
            parameters={
                "Error": "DataSync.NotStarted",
                "Cause": sfn.JsonPath.json_to_string(sfn.JsonPath.object_at("$.datasync")),
            },
        )
        return start.next(
            sfn.Choice(self, "DataSync started?")
            .when(sfn.Condition.is_present("$.datasync.TaskExecutionArn"), poll)
            .otherwise(no_execution.next(self.notify_failure))
        )

    def _training_result(self) -> sfn.Pass:
        # The job's description with a default for each optional member it lacks, as $.training.Job.
        return sfn.Pass(
            self,
            "TrainingResult",
            parameters={"Job.$": "States.JsonMerge($.training.Defaults, $.training.Job, false)"},
            result_path="$.training",
        )

    # ---- The kinds of state ----------------------------------------------------------------------------

    def sagemaker_job(
        self,
        id: str,
        action: str,
        request: str,
        *,
        sync: bool = True,
        result_selector: dict | None = None,
        result_path: str | None = None,
    ) -> sfn.CustomState:
        """A Task state that sends ``$.plan.requests.<request>`` to SageMaker ``action``; its failure is notified."""
        state: dict = {
            "Type": "Task",
            "Resource": f"arn:{cdk.Aws.PARTITION}:states:::sagemaker:{action}{'.sync' if sync else ''}",
            # The request whole, as its parameters: a field the Plan step leaves out (a volume key where the
            # instance type refuses one) stays out, where a Parameters path to it would raise States.Runtime.
            "InputPath": f"$.plan.requests.{request}",
            "ResultPath": result_path or f"$.{request}",
            "Retry": [
                {
                    "ErrorEquals": _transient("sagemaker", action, optimized_error),
                    "IntervalSeconds": 10,
                    "MaxAttempts": 5,
                    "BackoffRate": 2,
                }
            ],
        }
        if sync:  # a job's state waits as long as the job may run, then times out
            state["TimeoutSeconds"] = requests.TASK_TIMEOUT_SECONDS[request]
        if result_selector:
            state["ResultSelector"] = result_selector
        job = sfn.CustomState(self, id, state_json=state)
        job.add_catch(self.notify_failure, result_path="$.error")
        return job

    def sdk_call(
        self,
        id: str,
        service: str,
        action: str,
        *,
        parameters: dict,
        iam_resources: list[str],
        result_path: str,
        catch: tuple[list[str], sfn.IChainable] | None = None,
    ) -> tasks.CallAwsService:
        """A call of ``service``'s ``action`` (camel case, as in the ARN): throttling, timeouts and service errors
        tried five times (MaxAttempts) backing off from 5 s; ``catch``'s errors (once retried) go to its state, any
        other failure is notified."""
        call = tasks.CallAwsService(
            self,
            id,
            service=service,
            action=action,
            iam_action=f"{service}:{operation_name(action)}",
            parameters=parameters,
            iam_resources=iam_resources,
            result_path=result_path,
        )
        errors = ["States.Timeout", *_transient(service, action, sdk_error)]
        call.add_retry(errors=errors, interval=cdk.Duration.seconds(5), max_attempts=5, backoff_rate=2)
        if catch:
            call.add_catch(catch[1], errors=catch[0], result_path=result_path)  # the error where the answer would be
        call.add_catch(self.notify_failure, result_path="$.error")
        return call

    def poll(
        self,
        name: str,
        question: str,
        *,
        describe: tuple[str, str, str],
        parameters: dict,
        iam_resources: list[str],
        description: str,
        seconds: int,
        status: str,
        done: tuple[str, sfn.IChainable],
        failed: tuple[str, str],
    ) -> sfn.IChainable:
        """Wait, describe, and go on when the description's ``status`` reads done; fail when it reads failed, with
        the whole description as the cause (it is always there); else (or when the description lacks it) wait again.

        Args:
            describe: (state id, service, action) of the describing call, which ``sdk_call`` retries.
            description: where the description goes in the state's input.
            done: (status value, next state).
            failed: (status value, error name) for the failure notification.
        """
        wait = sfn.Wait(self, f"WaitFor{name}", time=sfn.WaitTime.duration(cdk.Duration.seconds(seconds)))
        state_id, service, action = describe
        call = self.sdk_call(
            state_id, service, action, parameters=parameters, iam_resources=iam_resources, result_path=description
        )
        status, (failed_status, error) = f"{description}.{status}", failed
        cause = sfn.JsonPath.json_to_string(sfn.JsonPath.object_at(description))
        failure = sfn.Pass(self, f"{name}Failed", result_path="$.error", parameters={"Error": error, "Cause": cause})
        return wait.next(call).next(
            sfn.Choice(self, question)
            .when(_reads(status, done[0]), done[1])
            .when(_reads(status, failed_status), failure.next(self.notify_failure))
            .otherwise(wait)
        )

    # ---- The machine -------------------------------------------------------------------------------------

    def _state_machine(
        self, definition: sfn.IChainable, log_group: logs.ILogGroup, log_level: str, include_execution_data: bool
    ) -> sfn.StateMachine:
        stack = cdk.Stack.of(self)
        name = f"{self._prefix}-workflow"
        arn = f"arn:{stack.partition}:states:{stack.region}:{stack.account}:stateMachine:{name}"
        role = iam.Role(  # assumed by this state machine only: its name is fixed, so its ARN is known before it is
            self,
            "StateMachineRole",
            assumed_by=iam.ServicePrincipal(
                "states.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}, "ArnEquals": {"aws:SourceArn": arn}},
            ),
        )
        machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=name,
            role=role,
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=log_group, level=sfn.LogLevel[log_level], include_execution_data=include_execution_data
            ),
            comment="GPT pre-training: plan, preprocess, stage to EFS, train, deploy, notify",
        )
        if log_level != "ALL":
            acknowledge(
                machine,
                {
                    "AwsSolutions::AwsSolutions-SF1": (
                        f"The stage's configuration chose {log_level}-level execution logs; failed states are still "
                        "logged, alarmed and e-mailed, and every execution's full history stays in Step Functions."
                    )
                },
            )
        return machine


def _is_true(path: str) -> sfn.Condition:
    """The Plan step's flag at ``path`` is true."""
    return sfn.Condition.boolean_equals(path, True)


def _reads(path: str, value: str) -> sfn.Condition:
    """``path`` is present and equals ``value`` (comparing an absent path raises States.Runtime)."""
    return sfn.Condition.and_(sfn.Condition.is_present(path), sfn.Condition.string_equals(path, value))


def _transient(service: str, action: str, name: Callable[[str, str, str], str]) -> list[str]:
    """What Step Functions names the transient errors of ``service``'s ``action`` (camel case, as in the ARN)."""
    return sorted({name(service, operation_name(action), code) for code in TRANSIENT_CODES})
