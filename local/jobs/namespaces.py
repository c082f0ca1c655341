"""A job's hosts on one machine as SageMaker runs its instances: each in namespaces of its own, as in a container.

Each host's command is PID 1 of its own PID namespace (``unshare --pid``), so it receives from outside only the
signals it has a handler for (pid_namespaces(7)), and a stop is SIGTERM to that PID 1 alone, as SageMaker sends it.
Each host also has its own network namespace, as the toolkit gives every host the same TF_CONFIG port (8890) and
TensorFlow binds it on 0.0.0.0: ``eth0`` linked to the job's switch (a bridge in a namespace of its own), an
address, an /etc/hosts that resolves ``algo-1 ... algo-N`` (bind-mounted in the host's mount namespace) and no
route out. The namespaces belong to processes (nothing is named or left on disk): they go with the job.

As root the namespaces are made directly; as a normal user inside one unprivileged user namespace per job
(``unshare --user --map-root-user``), where the kernel allows that. Where neither works (some distributions
restrict user namespaces; no util-linux or iproute2; not Linux), ``isolation()`` says why and the hosts are plain
processes (``Plain``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

SUBNET = "10.213.0"
TOOLS = ("unshare", "nsenter", "ip", "mount")
SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])  # often not on a normal user's PATH
# PID 1 of a host until its command replaces it: the hosts file in place, a line on stdin once the network is
# wired, then the command.
GATE = '"$0" --bind "$1" /etc/hosts && shift && read -r _ && exec "$@" </dev/null'  # sh -c GATE mount hosts argv
HOST_NAMESPACES = ["--net", "--pid", "--mount", "--fork", "--mount-proc"]
USER_NAMESPACE = ["--user", "--map-root-user"]
START_SECONDS = 30.0  # the most a host's namespaces take to appear


@functools.cache
def isolation() -> tuple[str | None, str]:
    """``("root" | "user", "")`` where hosts get namespaces here, else ``(None, why not)``."""
    if sys.platform != "linux":
        return None, f"{sys.platform} has no Linux namespaces"
    missing = [name for name in TOOLS if shutil.which(name, path=SEARCH) is None]
    if missing:
        return None, f"{', '.join(missing)} not found (util-linux, iproute2)"
    for mode, user in (("root", []), ("user", USER_NAMESPACE)):
        if mode == "root" and os.geteuid() != 0:
            continue
        probe = [tool("unshare"), *user, *HOST_NAMESPACES, "true"]
        if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
            return mode, ""
    return None, "namespaces cannot be made here (unprivileged user namespaces restricted, e.g. by AppArmor)"


def tool(name: str) -> str:
    """The full path of one of TOOLS (``ip`` lives in /usr/sbin, which a normal user's PATH may lack)."""
    return shutil.which(name, path=SEARCH) or name


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or f'exit code {done.returncode}'}")


def pid1(process: subprocess.Popen) -> int | None:
    """The host's PID 1 as this machine numbers it: the one child of its ``unshare --fork`` (None: not yet, or gone)."""
    with contextlib.suppress(OSError):
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        return int(children[0]) if children else None
    return None


class Namespaces:
    """The namespaces of one job's hosts: ``start`` a host, ``signal`` its PID 1, ``close`` the switch."""

    def __init__(self, names: list[str], folder: Path, mode: str):
        self.names, self.mode = names, mode
        folder.mkdir(parents=True, exist_ok=True)
        self.hosts_file = folder / "hosts"
        names_file = "".join(f"{SUBNET}.{i + 1} {host}\n" for i, host in enumerate(names))
        self.hosts_file.write_text(f"127.0.0.1 localhost\n{names_file}")
        user = USER_NAMESPACE if mode == "user" else []
        # The switch's namespaces are held by a process that ends when this one closes its stdin (or dies).
        holder = [tool("unshare"), *user, "--net", "--", "cat"]
        self.switch = subprocess.Popen(holder, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)
        _wait_for(lambda: Path(f"/proc/{self.switch.pid}/comm").read_text().strip() == "cat", self.switch)
        self._in(self.switch.pid, "ip", "link", "add", "br0", "type", "bridge")
        self._in(self.switch.pid, "ip", "link", "set", "br0", "up")

    def _user(self) -> list[str]:
        """Enters the job's user namespace (as its root, the caller's own uid outside), or nothing as root."""
        if self.mode != "user":
            return []
        return [tool("nsenter"), f"--user=/proc/{self.switch.pid}/ns/user", "--preserve-credentials", "--"]

    def _in(self, pid: int, *argv: str) -> None:
        """Runs ``argv`` in the network namespace of ``pid``, with the job's privileges."""
        _run(*self._user(), tool("nsenter"), f"--net=/proc/{pid}/ns/net", "--", tool(argv[0]), *argv[1:])

    def start(self, name: str, argv: list[str], **popen: object) -> subprocess.Popen:
        """Starts ``argv`` as PID 1 of host ``name``'s namespaces, once its network is wired."""
        gate = ["sh", "-c", GATE, tool("mount"), str(self.hosts_file)]
        process = subprocess.Popen(  # a session of its own: a Ctrl-C at the terminal is not a signal to the host
            [*self._user(), tool("unshare"), *HOST_NAMESPACES, "--", *gate, *argv],
            stdin=subprocess.PIPE,
            start_new_session=True,
            **popen,
        )
        _wait_for(lambda: pid1(process) is not None, process)
        number = self.names.index(name) + 1
        port, host = f"s{number}", ["name", "eth0", "netns", str(process.pid)]  # eth0 as on an instance
        self._in(self.switch.pid, "ip", "link", "add", port, "type", "veth", "peer", *host)
        self._in(self.switch.pid, "ip", "link", "set", port, "master", "br0", "up")
        self._in(process.pid, "ip", "addr", "add", f"{SUBNET}.{number}/24", "dev", "eth0")
        self._in(process.pid, "ip", "link", "set", "eth0", "up")
        self._in(process.pid, "ip", "link", "set", "lo", "up")
        process.stdin.write("\n")
        process.stdin.close()
        return process

    @staticmethod
    def signal(process: subprocess.Popen, signum: int) -> None:
        """``signum`` to the host's PID 1 only, as SageMaker signals a container (it arrives if PID 1 handles it)."""
        pid = pid1(process)
        if signum == signal.SIGKILL:  # the launcher too, which would report a killed PID 1 as exit code 1
            process.kill()
        with contextlib.suppress(ProcessLookupError):
            if pid:
                os.kill(pid, signum)

    def close(self) -> None:
        self.switch.stdin.close()
        self.switch.wait()


class Plain:
    """Hosts as plain processes, where namespaces are not to be had. With no PID 1 to signal (the init steps aside),
    a SIGTERM goes where the init would pass it on: to the host's other processes (its process group) but the
    command itself, or to the command where it is alone; a SIGKILL to them all."""

    @staticmethod
    def start(name: str, argv: list[str], **popen: object) -> subprocess.Popen:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True, **popen)

    @staticmethod
    def signal(process: subprocess.Popen, signum: int) -> None:
        others = [pid for pid in _group(process.pid) if pid != process.pid] if signum == signal.SIGTERM else []
        with contextlib.suppress(ProcessLookupError):  # the group may be gone already
            for pid in others:
                os.kill(pid, signum)
            if not others:
                os.killpg(process.pid, signum)

    def close(self) -> None:
        pass


def _group(pgid: int) -> list[int]:
    """The processes of a process group (``pgrep``, on Linux and macOS; none found without it)."""
    with contextlib.suppress(OSError):
        listed = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True, check=False).stdout
        return [int(pid) for pid in listed.split()]
    return []


def _wait_for(ready, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_SECONDS
    while True:
        with contextlib.suppress(OSError):
            if ready():
                return
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"namespaces did not start: {process.args} (exit code {process.poll()})")
        time.sleep(0.01)


@contextlib.contextmanager
def hosts(names: list[str], folder: Path, fallback: str = "") -> Iterator[Namespaces | Plain]:
    """Where the job's hosts run: namespaces of their own, or plain processes with a one-line notice of why and
    what differs (``fallback``: what the job itself does differently then)."""
    mode, why = isolation()
    if mode is None:
        print(f"  note: {why}, so hosts are plain processes here{fallback}, and a stop signals a host's "
              "processes, not its PID 1", flush=True)  # fmt: skip
    launcher = Namespaces(names, folder, mode) if mode else Plain()
    try:
        yield launcher
    finally:
        launcher.close()
