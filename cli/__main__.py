"""``python -m cli COMMAND``: work with a deployed stack from the terminal."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from botocore.exceptions import ClientError

from cli.errors import user_message
from cli.invoke import error_message, invoke, request_body
from cli.stage import caller_identity
from cli.start import execution_console_url, start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    start_cmd = commands.add_parser("start", help="start a workflow execution")
    start_cmd.add_argument("--stage", default="dev")
    start_cmd.add_argument("--input", type=Path, help="execution input JSON (see README); default {}")
    start_cmd.add_argument("--name", help="execution name (default run-<timestamp>)")
    check_cmd = commands.add_parser("check", help="show whose AWS credentials are in use (make deploy runs it first)")
    check_cmd.add_argument("--stage", default="dev")
    invoke_cmd = commands.add_parser("invoke", help="send a prompt to a deployed endpoint and print the reply")
    invoke_cmd.add_argument("prompt", help="the text to continue")
    invoke_cmd.add_argument("--stage", default="dev")
    invoke_cmd.add_argument("--endpoint", required=True, help="endpoint name (the Deploy step's output)")
    invoke_cmd.add_argument("--max-new-tokens", type=int, help="tokens to generate (default: the endpoint's, 64)")
    invoke_cmd.add_argument("--temperature", type=float, help="> 0 samples; 0 or unset = greedy")
    invoke_cmd.add_argument("--top-k", type=int, help="sample among the k most likely tokens")
    invoke_cmd.add_argument("--seed", type=int, help="sampling seed (default: random)")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except Exception as error:  # a known failure is one line that says what to do; anything else is a bug
        message = user_message(error)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return 1


def run(args: argparse.Namespace) -> int:
    if args.command == "check":
        print(f"AWS credentials: {caller_identity(args.stage)}")
        return 0
    if args.command == "start":
        arn = start(args.stage, args.input, args.name)
        print(f"Started {arn}\nWatch it: {execution_console_url(arn)}")
        return 0
    body = request_body(args.prompt, args.max_new_tokens, args.temperature, args.top_k, args.seed)
    try:
        reply = invoke(args.stage, args.endpoint, body)
    except ClientError as error:  # a refused request: the model's own reason
        if error.response.get("Error", {}).get("Code") != "ModelError":
            raise
        print(error_message(error), file=sys.stderr)
        return 1
    for item in reply:
        print(item["generated_text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
