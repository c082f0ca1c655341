"""Each host of a job is PID 1 of its own namespaces, with a network where the job's host names resolve."""

import sys

import pytest

from local.jobs import namespaces
from local.jobs.common import Host, run_hosts

pytestmark = pytest.mark.skipif(namespaces.isolation()[0] is None, reason=namespaces.isolation()[1])

# Every host binds the port every host uses (TF_CONFIG's 8890) on 0.0.0.0; algo-1 connects to algo-2 by name.
HOST = """
import os, socket, sys, time
print("pid", os.getpid(), "addresses", socket.gethostbyname("algo-1"), socket.gethostbyname("algo-2"))
server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); server.bind(("0.0.0.0", 8890))
server.listen()
if sys.argv[1] == "algo-2":
    client, _ = server.accept(); client.sendall(b"hello from algo-2"); client.close()
else:
    for _ in range(100):
        try:
            print(socket.create_connection(("algo-2", 8890), timeout=1).recv(100).decode()); break
        except OSError:
            time.sleep(0.1)
try:
    print("outside", socket.create_connection(("1.1.1.1", 53), timeout=1))
except OSError as error:
    print("no route out:", type(error).__name__)
"""


def test_hosts_are_pid_1_bind_the_same_port_reach_each_other_by_name_and_nothing_else(tmp_path):
    hosts = [Host(name, [sys.executable, "-c", HOST, name], {}, tmp_path) for name in ("algo-1", "algo-2")]
    codes = run_hosts(hosts, tmp_path / "logs", echo="none", grace_seconds=1.0)
    assert codes == {"algo-1": 0, "algo-2": 0}, [host.lines for host in hosts]
    first, second = ([line.strip() for line in host.lines] for host in hosts)
    assert first[0] == second[0] == "pid 1 addresses 10.213.0.1 10.213.0.2"
    assert first[1] == "hello from algo-2"
    assert first[2].startswith("no route out:") and second[1].startswith("no route out:")
