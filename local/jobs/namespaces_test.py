"""Each host of a job gets a network of its own where the job's host names resolve; nothing outlives the job."""

import subprocess

import pytest

from local.jobs import network

pytestmark = pytest.mark.skipif(not network.available(), reason="network namespaces need root and iproute2")


def namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout


def test_hosts_resolve_and_reach_each_other_and_the_namespaces_go_with_the_job():
    with network.host_networks(["algo-1", "algo-2"]) as prefixes:
        resolved = subprocess.run([*prefixes["algo-1"], "getent", "hosts", "algo-2"], capture_output=True, text=True)
        assert resolved.stdout.split() == ["10.213.0.2", "algo-2"]
        # algo-2 listens on the port every host uses (TF_CONFIG's 8890); algo-1 connects to it by name
        server = subprocess.Popen([*prefixes["algo-2"], "python3", "-c", LISTEN])
        reply = subprocess.run([*prefixes["algo-1"], "python3", "-c", CONNECT], capture_output=True, text=True)
        server.wait(timeout=10)
        assert reply.stdout.strip() == "hello from algo-2", reply.stderr
        spaces = [prefix[-1] for prefix in prefixes.values()]
        assert all(space in namespaces() for space in spaces)
    assert not any(space in namespaces() for space in spaces)


LISTEN = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 8890)); s.listen()
c, _ = s.accept(); c.sendall(b"hello from algo-2"); c.close()
"""
CONNECT = """
import socket, time
for _ in range(50):
    try:
        print(socket.create_connection(("algo-2", 8890), timeout=1).recv(100).decode()); break
    except OSError:
        time.sleep(0.1)
"""
