"""The network of a job's instances: each host in its own network namespace, named as SageMaker names it.

The TensorFlow toolkit gives every host the same TF_CONFIG port (8890) and TensorFlow binds it on 0.0.0.0, so
two hosts can only share a machine the way SageMaker's instances share a cluster: each with its own network.
Each host gets a namespace with a link to the job's switch (a bridge in a namespace of its own), an address and
an /etc/hosts that resolves ``algo-1 ... algo-N`` (``ip netns exec`` mounts it), and no route out: a job reaches
nothing but its peers. Needs root and iproute2 (``ip``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

NETNS_ETC = Path("/etc/netns")
SUBNET = "10.213.0"
NAME = re.compile(r"sm(\d+)-\w+")  # sm<pid of the job's process>-<host number or "sw">


def available() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def remove_stale() -> None:
    """Deletes the namespaces of jobs whose process is gone (killed before it could clean up)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    for space in (line.split()[0] for line in listed.splitlines() if line.strip()):
        if (match := NAME.fullmatch(space)) and not _alive(int(match.group(1))):
            _delete(space)


def _delete(space: str) -> None:
    subprocess.run(["ip", "netns", "del", space], check=False, capture_output=True)  # and its interfaces
    shutil.rmtree(NETNS_ETC / space, ignore_errors=True)


@contextmanager
def host_networks(hosts: list[str]) -> Iterator[dict[str, list[str]]]:
    """Creates the network of this process's job; yields each host's command prefix (``ip netns exec NS``)."""
    remove_stale()
    tag = str(os.getpid())
    switch = f"sm{tag}-sw"
    spaces = {host: f"sm{tag}-{i + 1}" for i, host in enumerate(hosts)}
    created: list[str] = []
    try:
        _ip("netns", "add", switch)
        created.append(switch)
        _ip("-n", switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", switch, "link", "set", "br0", "up")
        names = "".join(f"{SUBNET}.{i + 1} {host}\n" for i, host in enumerate(hosts))
        for i, space in enumerate(spaces.values()):
            _ip("netns", "add", space)
            created.append(space)
            inside, outside = f"h{tag}-{i + 1}", f"s{tag}-{i + 1}"  # interface names: 15 characters at most
            _ip("link", "add", inside, "type", "veth", "peer", "name", outside)
            _ip("link", "set", inside, "netns", space)
            _ip("link", "set", outside, "netns", switch)
            _ip("-n", switch, "link", "set", outside, "master", "br0", "up")
            _ip("-n", space, "addr", "add", f"{SUBNET}.{i + 1}/24", "dev", inside)
            _ip("-n", space, "link", "set", inside, "up")
            _ip("-n", space, "link", "set", "lo", "up")
            (NETNS_ETC / space).mkdir(parents=True, exist_ok=True)
            (NETNS_ETC / space / "hosts").write_text(f"127.0.0.1 localhost\n{names}")
        yield {host: ["ip", "netns", "exec", space] for host, space in spaces.items()}
    finally:
        for space in created:
            _delete(space)
