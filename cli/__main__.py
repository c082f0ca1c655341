"""``python -m cli COMMAND``: work with a deployed stack from the terminal."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.start import execution_console_url, start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    start_cmd = commands.add_parser("start", help="start a workflow execution")
    start_cmd.add_argument("--stage", default="dev")
    start_cmd.add_argument("--input", type=Path, help="execution input JSON (see README); default {}")
    start_cmd.add_argument("--name", help="execution name (default run-<timestamp>)")
    args = parser.parse_args(argv)
    if args.command == "start":
        arn = start(args.stage, args.input, args.name)
        print(f"Started {arn}\nWatch it: {execution_console_url(arn)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
