"""``python -m cli COMMAND``: check, start, follow and stop runs of a deployed stack, and use its model.

python -m cli validate --stage prod --input my-input.json   # offline: every error at once
python -m cli upload --stage prod ./corpus/ --prefix pile/  # to the raw bucket
python -m cli start --stage prod --input my-input.json --wait
python -m cli status | stop [EXECUTION] --stage prod
python -m cli outputs --stage prod
python -m cli generate "def main(" --endpoint NAME | --model model.tar.gz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from cli.data import describe_outputs, generate_local, upload
from cli.errors import CommandError, user_message
from cli.follow import Follower, execution_arn, follow, latest_execution
from cli.invoke import error_message, invoke, request_body
from cli.stage import caller_identity, stack_output, stack_outputs, stage_config, stage_session
from cli.start import STATE_MACHINE_OUTPUT, execution_console_url, start
from cli.validate import corpus_bucket, input_errors, modelled_speed, read_input
from infra.plan_step.execution_input import CORPUS_SUFFIXES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cli", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--traceback", action="store_true", help="on an error this command does not explain, show Python's traceback"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    validate_cmd = commands.add_parser("validate", help="check an execution input offline, every error at once")
    validate_cmd.add_argument("--input", type=Path, required=True, help="execution input JSON (see docs/workflow.md)")
    start_cmd = commands.add_parser("start", help="start a workflow execution")
    start_cmd.add_argument("--input", type=Path, help="execution input JSON (see docs/workflow.md); default {}")
    start_cmd.add_argument("--name", help="execution name (default run-<timestamp>)")
    start_cmd.add_argument("--wait", action="store_true", help="follow its states and jobs' logs until it ends")
    status_cmd = commands.add_parser("status", help="an execution's states so far and its status")
    stop_cmd = commands.add_parser("stop", help="stop an execution; its training job checkpoints first")
    for command in (status_cmd, stop_cmd):
        command.add_argument("execution", nargs="?", help="execution name or ARN (default: the latest)")
    commands.add_parser("outputs", help="the deployed stack's buckets, state machine and console links")
    upload_cmd = commands.add_parser("upload", help="upload a local corpus to the stack's raw bucket")
    upload_cmd.add_argument("path", type=Path, help=f"a corpus file or folder ({', '.join(CORPUS_SUFFIXES)})")
    upload_cmd.add_argument("--prefix", default="corpus/", help="key prefix in the raw bucket (default corpus/)")
    commands.add_parser("check", help="show whose AWS credentials are in use (make deploy runs it first)")
    for name in ("invoke", "generate"):
        about = "a deployed endpoint's" if name == "invoke" else "an endpoint's or a local model archive's"
        gen = commands.add_parser(name, help=f"continue a prompt: {about} reply")
        gen.add_argument("prompt", help="the text to continue")
        where = gen.add_mutually_exclusive_group(required=True)
        where.add_argument("--endpoint", help="endpoint name (the Deploy step's output)")
        if name == "generate":
            where.add_argument("--model", type=Path, help="a model.tar.gz here (runs/ of make run, or downloaded)")
            gen.add_argument(
                "--run-archive-code",
                action="store_true",
                help="with --model: serve the archive as it is, running its programs (its SavedModel's graph, its "
                "code/inference.py and code/lib): only for an archive you trust; by default only its weights are "
                "read, into this checkout's model, which serves them",
            )
        gen.add_argument("--max-new-tokens", type=int, help="tokens to generate (default: the endpoint's, 64)")
        gen.add_argument("--temperature", type=float, help="> 0 samples; 0 or unset = greedy")
        gen.add_argument("--top-k", type=int, help="sample among the k most likely tokens")
        gen.add_argument("--seed", type=int, help="sampling seed (default: random)")
    for command in commands.choices.values():
        command.add_argument("--stage", default="dev", help="the stage in cdk.json (default dev)")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except Exception as error:  # a known failure is one line that says what to do; anything else one line too
        message = user_message(error)
        if message is None and args.traceback:
            raise
        print(f"error: {message or unexpected(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def unexpected(error: BaseException) -> str:
    """The one line for an error no check explains: what it says, and how to see where it happened."""
    text = " ".join(str(error).split())
    text = text if len(text) <= 300 else text[:300] + " ..."
    return (
        f"{type(error).__name__}: {text} (not an error this command explains; python -m cli --traceback "
        "... shows where it happened)"
    )


def run(args: argparse.Namespace, session: Any = None) -> int:
    if args.command == "validate":
        return _validate(args)
    if args.command == "generate" and args.model:
        if args.run_archive_code:
            print(
                f"note: running {args.model} as it is (its SavedModel's graph, code/inference.py and code/lib), "
                "as asked",
                file=sys.stderr,
            )
        else:
            print(
                f"note: nothing of {args.model} is run: its weights are read into this checkout's model, which "
                "serves them (--run-archive-code runs the archive's own graph and code, for an archive you trust)",
                file=sys.stderr,
            )
        return _print_replies(generate_local(args.model, _body(args), args.run_archive_code))
    session = session or stage_session(args.stage)
    if args.command == "check":
        print(f"AWS credentials: {caller_identity(args.stage, session)}")
        return 0
    if args.command == "outputs":
        print(describe_outputs(stack_outputs(session, args.stage)))
        return 0
    if args.command == "upload":
        uri = upload(session, args.stage, args.path, args.prefix)
        print(f'Uploaded. Start a run on it with {{"corpus": {{"s3_uri": "{uri}"}}}}')
        return 0
    if args.command == "start":
        arn = start(args.stage, args.input, args.name, session)
        print(f"Started {arn}\nWatch it: {execution_console_url(arn)}")
        return (follow(session, arn) != "SUCCEEDED") if args.wait else 0
    if args.command in ("status", "stop"):
        return _status_or_stop(args, session)
    try:
        reply = invoke(args.stage, args.endpoint, _body(args), session)
    except ClientError as error:  # a refused request: the model's own reason
        if error.response.get("Error", {}).get("Code") != "ModelError":
            raise
        print(error_message(error), file=sys.stderr)
        return 1
    return _print_replies(reply)


def _validate(args: argparse.Namespace) -> int:
    raw = read_input(args.input)
    errors = input_errors(raw, stage_config(args.stage))
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if errors:
        print(f"{len(errors)} error(s) in {args.input}; the Plan step would refuse it", file=sys.stderr)
        return 1
    print(f"{args.input}: valid for stage {args.stage} (checked offline; the Plan step also checks the corpus exists)")
    config = stage_config(args.stage)
    print(f"speed: {modelled_speed(raw, config)}")
    bucket = corpus_bucket(raw)
    if bucket and bucket not in config.source_buckets:
        print(
            f"note: the corpus's bucket {bucket} was taken to be the stack's raw bucket (its name is known only "
            "once deployed); the Plan step refuses it if it is not that bucket and not in the stage's source_buckets"
        )
    return 0


def _status_or_stop(args: argparse.Namespace, session: Any) -> int:
    machine = stack_output(stack_outputs(session, args.stage), STATE_MACHINE_OUTPUT, args.stage)
    arn = execution_arn(machine, args.execution) if args.execution else latest_execution(session, machine)
    if arn is None:
        raise CommandError(f"no executions of {machine} yet: start one (python -m cli start)")
    if args.command == "stop":
        session.client("stepfunctions").stop_execution(
            executionArn=arn, error="Stopped", cause="stopped with python -m cli stop"
        )
        print(
            f"Stopped {arn}. Step Functions stops its running job (StopTrainingJob: train.py gets SIGTERM and "
            "checkpoints the step in flight); start again with the same run_name to resume from that checkpoint."
        )
        return 0
    execution = Follower(session, arn, show_logs=False).poll()
    print(f"{execution['name']}: {execution['status']} (started {execution['startDate']})")
    return 0


def _body(args: argparse.Namespace) -> dict:
    return request_body(args.prompt, args.max_new_tokens, args.temperature, args.top_k, args.seed)


def _print_replies(reply: list[dict]) -> int:
    for item in reply:
        print(item["generated_text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
