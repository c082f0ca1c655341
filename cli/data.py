"""The stack's buckets and links, a corpus into its raw bucket, and text from a model archive.

python -m cli outputs --stage dev
python -m cli upload --stage dev ./my-corpus/ [--prefix pile/]    # then {"corpus": {"s3_uri": <printed>}}
python -m cli generate --model runs/s3/.../model.tar.gz "def main(" [--run-archive-code]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cli.errors import CommandError
from cli.invoke import error_message
from cli.stage import stack_output, stack_outputs
from infra.archives import UnsafeArchive, extract
from infra.plan_step.execution_input import CORPUS_SUFFIXES

RAW_BUCKET_OUTPUT = "RawBucket"
ROOT = Path(__file__).resolve().parent.parent


def describe_outputs(outputs: dict[str, str]) -> str:
    """One line per output, buckets as s3:// URIs, sorted by key."""
    width = max(map(len, outputs), default=0)
    lines = []
    for key, value in sorted(outputs.items()):
        shown = f"s3://{value}/" if key.endswith("Bucket") else value
        lines.append(f"{key:<{width}}  {shown}")
    return "\n".join(lines)


def corpus_files(path: Path) -> list[Path]:
    """The files to upload: ``path`` itself or the corpus files under it; anything else is a CommandError."""
    if not path.exists():
        raise CommandError(f"{path}: no such file or folder")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    links = [f for f in (path, *files) if f.is_symlink()]
    if links:  # a link's target (/etc/passwd ...) is not the corpus the user pointed at
        raise CommandError(f"{links[0]}: a symbolic link; links are not followed: upload the file itself")
    accepted = [f for f in files if f.name.endswith(CORPUS_SUFFIXES)]
    rejected = [f for f in files if f not in accepted]
    if rejected or not accepted:
        shown = ", ".join(str(f) for f in rejected[:3]) or f"nothing under {path}"
        raise CommandError(
            f"{shown}: not a corpus file; preprocessing reads {', '.join(CORPUS_SUFFIXES)} "
            '(JSON lines with a "text" field, or plain text); convert or remove the others'
        )
    return accepted


def upload(session: Any, stage: str, path: Path, prefix: str, out=print) -> str:
    """Uploads the corpus at ``path`` to the stack's raw bucket under ``prefix``; returns the corpus URI."""
    from boto3.s3.transfer import TransferConfig

    files = corpus_files(path)
    bucket = stack_output(stack_outputs(session, stage), RAW_BUCKET_OUTPUT, stage)
    prefix = f"{prefix.strip('/')}/" if prefix.strip("/") else ""  # no key starts with "/"
    s3 = session.client("s3")
    base = path if path.is_dir() else path.parent
    for file in files:
        key = prefix + file.relative_to(base).as_posix()
        s3.upload_file(str(file), bucket, key, Config=TransferConfig(use_threads=False))  # multipart when large
        out(f"  {file} -> s3://{bucket}/{key}")
    return f"s3://{bucket}/{prefix}"


def generate_local(
    archive: Path, body: dict, run_archive_code: bool = False, python: str = sys.executable
) -> list[dict]:
    """Serves ``body`` from a model.tar.gz (``local/endpoint.py``, in its own process: it imports TensorFlow);
    returns the reply or raises CommandError with the model's message.

    Args:
        archive: the model.tar.gz (unpacked with ``infra.archives.extract``: unsafe members are refused).
        body: the request.
        run_archive_code: serve the archive as it is, running its programs: its SavedModel's graph and its own
            ``code/`` (inference.py, code/lib). By default nothing of it runs: its weights are read into this
            checkout's model, whose own export and ``training/serving/inference.py`` serve it
            (``training/export/received.py``).
        python: the interpreter of the endpoint process.
    """
    if not archive.is_file():
        raise CommandError(f"{archive}: no such model archive (the Train step's model.tar.gz)")
    with tempfile.TemporaryDirectory() as folder:
        try:
            extract(archive, Path(folder))
        except UnsafeArchive as error:
            raise CommandError(f"refused: {error}") from None
        how = [] if run_archive_code else ["--weights-only"]
        done = subprocess.run(
            [python, "-m", "local.endpoint", *how, folder, json.dumps(body)], cwd=ROOT, capture_output=True, text=True
        )
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1][-500:]
        raise CommandError(f"the model archive could not be served: {last}") from None
    if done.returncode:
        raise CommandError(f"the model refused the request: {error_message(SimpleNamespace(response=answer))}")
    return json.loads(answer["Body"])
