"""What processing and training jobs share here: the job folder, object copies, hosts as processes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from infra.plan_step.object_store import split_uri
from local.folder_store import FolderStore
from local.jobs import namespaces
from local.jobs.console import ConsoleFilter, Echo

CONTAINER_ROOT = "/opt/ml"
STOP_GRACE_SECONDS = 120.0  # SageMaker sends SIGTERM to a stopped job's containers and kills them this much later
REPO_ROOT = Path(__file__).resolve().parent.parent.parent
IMAGE_FILES = {"/usr/local/bin/entrypoint.sh": str(Path(__file__).with_name("dlc_entrypoint.sh"))}  # image -> here


class JobFailed(Exception):
    """A job ended in status Failed; Step Functions reports a failed .sync task as States.TaskFailed."""

    error = "States.TaskFailed"


def in_host(value: str, host_dir: Path) -> str:
    """A container path as it is on this machine: ``/opt/ml/model`` -> ``<host_dir>/model``."""
    return value.replace(CONTAINER_ROOT, str(host_dir))


def copy_objects(store: FolderStore, objects: list[tuple[str, str]], dest: Path) -> None:
    """Copies (uri, relative path) pairs from the store into ``dest``."""
    for uri, relative in objects:
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(store.path(uri), target)


def objects_under(store: FolderStore, uri: str) -> list[tuple[str, str]]:
    """An S3Prefix as SageMaker reads it: every object under the prefix, relative to it (a single key: its name)."""
    found = store.list(uri)
    if len(found) == 1 and found[0][0] == uri:
        return [(uri, uri.rsplit("/", 1)[-1])]
    prefix = uri if uri.endswith("/") else uri.rsplit("/", 1)[0] + "/"
    return [(u, u[len(prefix) :]) for u, _ in found]


def objects_in_manifest(store: FolderStore, manifest_uri: str) -> list[tuple[str, str]]:
    """A SageMaker ManifestFile: ``[{"prefix": "s3://b/p/"}, "key1", ...]``."""
    entries = json.loads(store.path(manifest_uri).read_text())
    prefix = entries[0]["prefix"]
    return [(prefix + key, key) for key in entries[1:]]


def upload_folder(store: FolderStore, folder: Path, uri: str) -> None:
    bucket, key = split_uri(uri if uri.endswith("/") else uri + "/")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        target = store.path(f"s3://{bucket}/{key}{path.relative_to(folder).as_posix()}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def container_command(entrypoint: list[str], arguments: list[str]) -> list[str]:
    """What a container runs (ContainerEntrypoint + ContainerArguments), the image's files named as they are here."""
    return [IMAGE_FILES.get(part, part) for part in [*entrypoint, *arguments]]


def local_environment(extra: dict[str, str]) -> dict[str, str]:
    """This machine's environment for a job process: the project's venv first, no network for pip."""
    env = {**os.environ, **extra}
    env.pop("PYTHONPATH", None)  # a job sees its own code folder, not this repository
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_NO_INDEX"] = "1"  # the local run never reaches a package index
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Host:
    """One "instance" of a job: a process with its own folder."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    lines: list[str] = field(default_factory=list)


def run_hosts(
    hosts: list[Host],
    log_dir: Path,
    echo: Echo = "progress",
    grace_seconds: float = STOP_GRACE_SECONDS,
    fallback: str = "",
    interrupt: Callable[[], bool] = lambda: False,
) -> dict[str, int]:
    """Starts every host at once, streams their output (prefixed by host), stops all if one fails.

    Each host's output goes whole to ``<log_dir>/<host>.log``; ``echo`` says what of it is printed here too
    (``"progress"``: what ``local.jobs.console`` does not count as library noise). Each host's command is PID 1
    of its own namespaces (``local/jobs/namespaces.py``; ``fallback``: what the job does where there are none).
    ``interrupt`` says when to stop the job as a spot reclaim does, polled while the hosts run.

    A host is stopped as SageMaker stops an instance: SIGTERM to its PID 1, SIGKILL ``grace_seconds`` later.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    processes = {}
    threads, consoles = [], []
    with namespaces.hosts([host.name for host in hosts], log_dir.parent, fallback) as launcher:
        try:
            for host in hosts:
                processes[host.name] = launcher.start(
                    host.name, host.argv, cwd=host.cwd, env=host.env, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, bufsize=1,
                )  # fmt: skip
                log = log_dir / f"{host.name}.log"
                consoles.append(ConsoleFilter(echo))
                thread = threading.Thread(
                    target=_pump, args=(processes[host.name], host, log, consoles[-1]), daemon=True
                )
                thread.start()
                threads.append(thread)
            codes = _wait(processes, interrupt)
        finally:  # a failed host, or this job stopped (a timeout, Ctrl-C): no host outlives the job
            for console in consoles:
                console.stopping = True
            _stop(launcher, list(processes.values()), grace_seconds)
    codes.update({name: process.returncode for name, process in processes.items()})
    for thread in threads:
        thread.join(timeout=5)
    return codes


def _wait(processes: dict[str, subprocess.Popen], interrupt: Callable[[], bool]) -> dict[str, int]:
    """Until every host has ended, one has failed (the job fails, the others are stopped), or ``interrupt()``."""
    codes: dict[str, int] = {}
    while len(codes) < len(processes) and not interrupt():
        for name, process in processes.items():
            if name not in codes and process.poll() is not None:
                codes[name] = process.returncode
        if any(code != 0 for code in codes.values()):
            break
        time.sleep(0.2)
    return codes


def _stop(launcher: namespaces.Namespaces | namespaces.Plain, processes: list[subprocess.Popen], grace: float) -> None:
    """SIGTERM to every host, SIGKILL after ``grace`` seconds; returns once all have ended."""
    for process in processes:
        launcher.signal(process, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
    for process in processes:
        launcher.signal(process, signal.SIGKILL)
        process.wait()


def _pump(process: subprocess.Popen, host: Host, log: Path, console: ConsoleFilter) -> None:
    with log.open("w") as out:
        for line in process.stdout:
            host.lines.append(line)
            out.write(line)
            if console.shows(line):
                print(f"    [{host.name}] {line}", end="", flush=True)
