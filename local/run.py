"""``make run``: synthesize the stack and run its state machine on this machine, end to end, no AWS account.

    python -m local.run [--input my-input.json] [--corpus PATH] [--execution-name NAME] [--stage dev] [--verbose]
                        [--inject-faults throttle,failed-job,lost-endpoint,missing-quota]

1. ``cdk synth`` writes the template (cdk-nag included) and the assets, as for a deployment;
2. the assets are "published" to a folder that stands in for S3 (``runs/s3``), with a sample corpus;
3. the state machine definition is taken from the template, its references resolved to local names, and
   run by a real ASL interpreter whose Task states call the local handlers (``local/tasks.py``);
4. a summary: tokens, losses, where the model, tokenizer, checkpoints and a loss curve are.

``--corpus PATH`` (``make run CORPUS=path``) trains on a file or folder of your own (``.jsonl``, ``.jsonl.zst``,
``.jsonl.gz``, ``.txt``) instead of the sample. Any field of the execution input can be overridden with ``--input``
(``make run INPUT=file.json``);
give the same ``run_name`` again to resume a run from its last checkpoint; ``--interrupt-at-step N`` interrupts
the (then spot) training job at step N as a spot reclaim does, and the job starts again from its checkpoints.
The console shows each job's progress; its whole output, TensorFlow's and the SageMaker toolkit's logging
included, is in the job's ``logs/`` folder (``--verbose``, ``make run VERBOSE=1``: on the console too).

``--inject-faults`` (``make run FAULTS=throttle,lost-endpoint``) makes the service calls fail as AWS's do, under
AWS's error names, for the definition's Retry and Catch to handle; ``local/faults.py`` says what each kind does
and how the execution should end.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cli.data import corpus_files
from cli.errors import CommandError, user_message
from infra.config import ConfigError, deep_merge, load_stage_config
from local.corpus import own_corpus, sample_mix_input, write_mix_corpus
from local.faults import parse_kinds
from local.folder_store import FolderStore
from local.stack import LocalStack
from local.summary import summarize
from local.tasks import RunContext

ROOT = Path(__file__).resolve().parent.parent
NODE = ROOT / "node_modules" / ".bin" / "node"
CDK = ROOT / "node_modules" / ".bin" / "cdk"
DEFAULT_INPUT = Path(__file__).with_name("default-input.json")


def synthesize(stage: str, cdk_out: Path) -> str:
    """``cdk synth`` into ``cdk_out``; returns the stack's name."""
    print(f"Synthesizing stage {stage} (cdk-nag on) ...", flush=True)
    subprocess.run([str(CDK), "synth", "-q", "-c", f"stage={stage}", "--output", str(cdk_out)], cwd=ROOT, check=True)
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    return load_stage_config({**context, "stage": stage}).stack_name


def read_input(path: Path | None) -> dict:
    """The input file's JSON object ({} without one); the run puts it over the corpus's and the default input."""
    data = json.loads(path.read_text()) if path else {}
    if not isinstance(data, dict):
        raise ConfigError("input", type(data).__name__, f"a JSON object (see {DEFAULT_INPUT.name})")
    return data


def run(
    stage: str,
    execution_input: dict,
    execution_name: str,
    runs: Path,
    corpus_mb: int = 24,
    only_required_members: bool = False,
    verbose: bool = False,
    faults: tuple[str, ...] = (),
    interrupt_at_step: int = 0,
    corpus: Path | None = None,
) -> int:
    """Runs the workflow on ``execution_input`` (the user's, put over the corpus's and local/default-input.json)."""
    cdk_out = runs / "cdk.out"
    name = synthesize(stage, cdk_out)
    stack = LocalStack.load(cdk_out, name)
    store = FolderStore(runs / "s3")
    stack.publish_assets(store)
    defaults = json.loads(DEFAULT_INPUT.read_text())
    if corpus:
        most = defaults["preprocessing"]["instance_count"]
        corpus_input = own_corpus(corpus, store, stack.settings().raw_bucket, most)
        count = len(store.list(corpus_input["corpus"]["s3_uri"]))
        print(
            f"Your corpus {corpus}: {count} file(s) at {corpus_input['corpus']['s3_uri']}, dataset "
            f"{corpus_input['dataset']['name']}, {corpus_input['preprocessing']['instance_count']} preprocessing "
            "instance(s)",
            flush=True,
        )
    else:
        sample = f"s3://{stack.settings().raw_bucket}/sample-mix/"
        given = execution_input.get("corpus")
        named = isinstance(given, dict) and ("s3_uri" in given or "sources" in given)
        corpus_input = {} if named else {"corpus": sample_mix_input(sample)}  # unless the input names its own corpus
        if not named and not store.list(sample):
            written = write_mix_corpus(store.path(sample), total_mb=corpus_mb)
            mix = ", ".join(
                f"{name} ({len(paths)} {paths[0].name.split('.', 1)[1]})" for name, paths in written.items()
            )
            print(f"Wrote a sample corpus of two sources to {sample}: {mix}", flush=True)

    execution_dir = runs / "executions" / execution_name
    execution_dir.mkdir(parents=True, exist_ok=True)
    context = RunContext(
        str(cdk_out),
        name,
        str(runs / "s3"),
        str(runs / "efs"),
        str(execution_dir),
        only_required_members,
        verbose,
        faults,
        interrupt_at_step,
    )
    (execution_dir / "context.json").write_text(json.dumps(dataclasses.asdict(context), indent=2))
    (execution_dir / "definition.json").write_text(json.dumps(stack.definition(), indent=2))
    execution_input = deep_merge(deep_merge(defaults, corpus_input), execution_input)  # the user's input wins
    if interrupt_at_step:  # only a spot job is interrupted and started again
        execution_input = deep_merge(execution_input, {"training": {"spot": True}})
    (execution_dir / "input.json").write_text(json.dumps(execution_input, indent=2))
    result_path = execution_dir / "result.json"
    print(f"Execution {execution_name}: input {execution_dir / 'input.json'}", flush=True)
    print(f"Injected faults: {', '.join(faults)} (local/faults.py)\n" if faults else "", flush=True)

    started = time.time()
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    interpreter = subprocess.Popen(
        [str(NODE), str(ROOT / "local" / "run_state_machine.mjs"), str(execution_dir / "definition.json"),
         str(execution_dir / "input.json"), str(execution_dir / "context.json"), execution_name, str(result_path)],
        cwd=ROOT, env=env,
    )  # fmt: skip
    wait_through_ctrl_c(interpreter)
    result = json.loads(result_path.read_text())
    if result["status"] == "ABORTED":
        resume = execution_dir / "resume.json"
        resume.write_text(json.dumps({**execution_input, "run_name": execution_input.get("run_name", execution_name)}))
        print(resume_line(time.time() - started, resume), flush=True)
        return 130
    print(summarize(result, store, execution_dir, time.time() - started), flush=True)
    return 0 if result["status"] == "SUCCEEDED" else 1


def wait_through_ctrl_c(process: subprocess.Popen) -> int:
    """Waits for ``process`` to end; a Ctrl-C (which the terminal sends it too, and it stops the execution as
    StopExecution does) says so once and keeps waiting: nothing is left running when this returns."""
    try:
        return process.wait()
    except KeyboardInterrupt:
        print(
            "\nCtrl-C: stopping the execution as a stop does on AWS (SIGTERM to the running job's hosts; training "
            "checkpoints the step in flight) ...",
            flush=True,
        )
        signal.signal(signal.SIGINT, lambda *_: None)  # a second Ctrl-C leaves no host behind (no-op: not SIG_IGN,
        # under which a Ctrl-C already pending raises OSError)
        return process.wait()


def resume_line(seconds: float, resume: Path) -> str:
    """The one line an interrupted run ends with: how to go on from where it stopped."""
    shown = resume.relative_to(ROOT) if resume.is_relative_to(ROOT) else resume
    return (
        f"Interrupted after {seconds:.0f} s. Resume it with: make run INPUT={shown} (the same run_name: training "
        "goes on from its last checkpoint, finished preprocessing is reused)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", default="dev")
    parser.add_argument("--input", type=Path, help="JSON merged over local/default-input.json")
    parser.add_argument("--corpus", type=Path, help="a corpus file or folder of your own (default: the sample)")
    parser.add_argument("--execution-name", default=time.strftime("local-%Y%m%d-%H%M%S"))
    parser.add_argument("--runs", type=Path, default=ROOT / "runs", help="where the local S3, EFS and jobs live")
    parser.add_argument("--corpus-mb", type=int, default=24, help="size of the sample corpus written on first use")
    parser.add_argument(
        "--only-required-members",
        action="store_true",
        help="answer every service call without the response members its API model marks optional",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="echo the jobs' whole output (their logs/ folders keep it anyway)"
    )
    parser.add_argument(
        "--inject-faults",
        type=parse_kinds,
        default=(),
        metavar="KINDS",
        help="comma list of throttle (every call once), failed-job, lost-endpoint, missing-quota; see local/faults.py",
    )
    parser.add_argument(
        "--interrupt-at-step",
        type=int,
        default=0,
        help="a spot interruption: stop the training job (spot) at this step and start it again from its checkpoints",
    )
    args = parser.parse_args(argv)
    try:  # a bad stage or input file is one line, before the synth
        context = json.loads((ROOT / "cdk.json").read_text())["context"]
        load_stage_config({**context, "stage": args.stage})
        execution_input = read_input(args.input)
        if args.corpus:
            corpus_files(args.corpus)  # what it would copy, refused now if it is not a corpus
    except (ConfigError, CommandError, OSError, ValueError) as error:
        print(f"error: {user_message(error) or error}", file=sys.stderr)
        return 2
    try:
        return _run(args, execution_input)
    except KeyboardInterrupt:  # during the synth or the sample corpus, before the execution: nothing to stop
        print("\nInterrupted before the execution started: nothing ran, nothing to resume", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace, execution_input: dict) -> int:
    return run(
        args.stage,
        execution_input,
        args.execution_name,
        args.runs.resolve(),
        args.corpus_mb,
        args.only_required_members,
        args.verbose,
        args.inject_faults,
        args.interrupt_at_step,
        args.corpus,
    )


if __name__ == "__main__":
    sys.exit(main())
