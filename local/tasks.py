"""The local handlers of the state machine's Task states, one process per task.

The interpreter (``run_state_machine.mjs``) calls ``python -m local.tasks CONTEXT RESULT`` with
``{"state", "resource", "input"}`` on stdin, ``input`` being the state's Parameters already resolved.
The handler writes the service's answer, or ``{"Error", "Cause"}`` as Step Functions would report the
failure (a service's error under the name Step Functions gives it: ``local/service_errors.py``), to RESULT,
after any fault the run injects (``local/faults.py``). Only the AWS control plane is emulated; the jobs run the
real entry points.
"""

from __future__ import annotations

import json
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import botocore.session

from infra.plan_step.plan import plan_execution
from infra.plan_step.quotas import ServiceQuotas
from local import datasync, hosting
from local.faults import Faults
from local.folder_store import FolderStore
from local.jobs.common import JobFailed
from local.jobs.console import Echo
from local.jobs.processing import run_processing_job
from local.jobs.training import run_training_job
from local.quotas import LocalServiceQuotas
from local.service_errors import ServiceError, as_task_error
from local.stack import LocalStack

SAGEMAKER = "arn:aws:states:::sagemaker:"
SDK = "arn:aws:states:::aws-sdk:"
SNS_PUBLISH = "arn:aws:states:::sns:publish"


@dataclass(frozen=True)
class RunContext:
    """Where one local execution keeps things (written by ``local.run`` as context.json)."""

    cdk_out: str
    stack_name: str
    store: str  # the folder standing in for S3
    efs: str  # the folder standing in for the file system
    execution_dir: str  # jobs, endpoints and notifications of this execution
    only_required_members: bool = False  # answer without the optional members AWS may leave out
    verbose: bool = False  # echo every line of the jobs' output, library logging included
    faults: tuple[str, ...] = ()  # local.faults.KINDS to inject
    interrupt_at_step: int = 0  # interrupt the spot training job there once, as a spot reclaim does

    @classmethod
    def read(cls, path: str | Path) -> RunContext:
        fields = json.loads(Path(path).read_text())
        return cls(**{**fields, "faults": tuple(fields.get("faults", ()))})


@dataclass(frozen=True)
class Call:
    """What a handler is given: the Task state's parameters and this execution's places."""

    parameters: Any
    context: RunContext
    stack: LocalStack
    store: FolderStore

    @property
    def execution(self) -> Path:
        return Path(self.context.execution_dir)

    @property
    def efs(self) -> Path:
        return Path(self.context.efs)

    @property
    def hosting(self) -> Path:
        """The stage's endpoints, configurations and models (``runs/hosting``, beside the store): they outlive an
        execution, as they do in AWS."""
        return Path(self.context.store).with_name("hosting")

    @property
    def echo(self) -> Echo:
        return "all" if self.context.verbose else "progress"


@dataclass(frozen=True)
class Task:
    """How the local run answers one Task resource.

    Args:
        service: the botocore service of ``operation``.
        operation: the operation whose output shape the answer has (a .sync job's answer is its Describe*).
        run: the handler.
        trimmed: under ``only_required_members``, the answer loses the members its shape does not require (not a
            publish's answer: the notifications discard it).
    """

    service: str
    operation: str
    run: Callable[[Call], Any]
    trimmed: bool = True


# Every Task resource of the definition but the Plan function, which ``handle`` calls by its name.
TASKS = {
    f"{SAGEMAKER}createProcessingJob.sync": Task(
        "sagemaker",
        "DescribeProcessingJob",
        lambda call: run_processing_job(call.parameters, call.store, call.execution / "jobs", call.echo),
    ),
    f"{SAGEMAKER}createTrainingJob.sync": Task(
        "sagemaker",
        "DescribeTrainingJob",
        lambda call: run_training_job(
            call.parameters, call.store, call.execution / "jobs", call.efs, call.echo, call.context.interrupt_at_step
        ),
    ),
    f"{SAGEMAKER}createModel": Task(
        "sagemaker", "CreateModel", lambda call: hosting.create_model(call.parameters, call.store, call.hosting)
    ),
    f"{SAGEMAKER}createEndpointConfig": Task(
        "sagemaker", "CreateEndpointConfig", lambda call: hosting.create_endpoint_config(call.parameters, call.hosting)
    ),
    f"{SAGEMAKER}createEndpoint": Task(
        "sagemaker", "CreateEndpoint", lambda call: hosting.create_endpoint(call.parameters, call.hosting)
    ),
    f"{SAGEMAKER}updateEndpoint": Task(
        "sagemaker", "UpdateEndpoint", lambda call: hosting.update_endpoint(call.parameters, call.hosting)
    ),
    f"{SDK}sagemaker:describeEndpoint": Task(
        "sagemaker", "DescribeEndpoint", lambda call: hosting.describe_endpoint(call.parameters, call.hosting)
    ),
    f"{SDK}sagemaker:describeEndpointConfig": Task(
        "sagemaker",
        "DescribeEndpointConfig",
        lambda call: hosting.describe_endpoint_config(call.parameters, call.hosting),
    ),
    f"{SDK}sagemaker:deleteEndpointConfig": Task(
        "sagemaker",
        "DeleteEndpointConfig",
        lambda call: hosting.delete_endpoint_config(call.parameters, call.hosting),
    ),
    f"{SDK}sagemaker:deleteModel": Task(
        "sagemaker", "DeleteModel", lambda call: hosting.delete_model(call.parameters, call.hosting)
    ),
    f"{SDK}datasync:startTaskExecution": Task(
        "datasync",
        "StartTaskExecution",
        lambda call: datasync.start_task_execution(call.stack, call.store, call.efs, call.parameters),
    ),
    f"{SDK}datasync:describeTaskExecution": Task(
        "datasync", "DescribeTaskExecution", lambda call: datasync.describe_task_execution(call.efs, call.parameters)
    ),
    SNS_PUBLISH: Task("sns", "Publish", lambda call: publish(call.parameters, call.execution), trimmed=False),
}
# Optional in the model, but what a poll needs: without the execution's ARN the workflow fails (notified), without
# a status it waits for ever; kept, so that such a run shows every other member's absence end to end.
POLLED = {"TaskExecutionArn", "Status", "EndpointStatus"}


def required_members_only(resource: str, answer: Any) -> Any:
    """The answer without the top-level members its botocore output shape does not require."""
    task = TASKS.get(resource)
    if task is None or not task.trimmed or not isinstance(answer, dict):
        return answer
    shape = botocore.session.get_session().get_service_model(task.service).operation_model(task.operation).output_shape
    if shape is None:  # an operation that answers nothing (DeleteModel)
        return {}
    keep = set(shape.required_members) | POLLED
    return {name: value for name, value in answer.items() if name in keep}


def handle(context: RunContext, resource: str, parameters: Any) -> Any:
    stack = LocalStack.load(Path(context.cdk_out), context.stack_name)
    store = FolderStore(context.store)
    if resource == stack.plan_function_name():
        quotas = ServiceQuotas(LocalServiceQuotas(new_account="missing-quota" in context.faults))
        return plan_execution(parameters["input"], parameters["execution_name"], stack.settings(), store, quotas)
    if resource not in TASKS:
        raise NotImplementedError(f"no local handler for {resource}")
    return TASKS[resource].run(Call(parameters, context, stack, store))


def publish(parameters: dict, execution: Path) -> dict:
    """SNS: the message is printed (and kept in notifications.log)."""
    text = f"{parameters.get('Subject', '')}\n{parameters['Message']}\n"
    with (execution / "notifications.log").open("a") as log:
        log.write(text + "\n")
    print(f"\n  SNS  {parameters.get('Subject', '')}\n       {parameters['Message']}\n", flush=True)
    return {"MessageId": f"local-{abs(hash(text)) % 10**12}"}


def as_step_functions_error(error: Exception, resource: str) -> dict[str, str]:
    """The (Error, Cause) pair Step Functions would report for this failure of a call to ``resource``."""
    if isinstance(error, ServiceError):
        return as_task_error(resource, error)
    if isinstance(error, JobFailed):  # a failed .sync job
        return {"Error": error.error, "Cause": json.dumps({"FailureReason": str(error)})}
    # An exception raised by a Lambda function: its type is the error name, the cause a JSON document.
    cause = {
        "errorType": type(error).__name__,
        "errorMessage": str(error),
        "stackTrace": traceback.format_tb(error.__traceback__),
    }
    return {"Error": type(error).__name__, "Cause": json.dumps(cause)}


def _stop(signum: int, frame: Any) -> None:
    """SIGTERM from the interpreter, or Ctrl-C's SIGINT: unwinds run_hosts, which stops the job's hosts as SageMaker
    does. Once: the other of the two, arriving while the hosts stop, must not cut their stop short."""
    for stop in (signal.SIGTERM, signal.SIGINT):  # a no-op, not SIG_IGN: one already pending would raise OSError
        signal.signal(stop, _already_stopping)
    raise SystemExit(128 + signum)


def _already_stopping(signum: int, frame: Any) -> None:
    """The second stop signal, while run_hosts stops the hosts: nothing more to do."""


def main(handler: Callable[[RunContext, str, Any], Any] = handle) -> int:
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    context_path, result_path = sys.argv[1], sys.argv[2]
    request = json.load(sys.stdin)
    context = RunContext.read(context_path)
    execution = Path(context.execution_dir)
    execution.mkdir(parents=True, exist_ok=True)
    try:
        Faults(frozenset(context.faults), execution / "faults").before(
            request["state"], request["resource"], request["input"]
        )
        answer = handler(context, request["resource"], request["input"])
        if context.only_required_members:
            answer = required_members_only(request["resource"], answer)
        result = {"ok": answer}
        code = 0
    except Exception as error:  # every failure goes back to the interpreter, which applies Retry and Catch
        result = {"error": as_step_functions_error(error, request["resource"])}
        code = 1
    Path(result_path).write_text(json.dumps(result, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main())
