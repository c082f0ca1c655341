import pytest

from contract.network import NetworkCheck, NetworkFallback, nccl_environment, nccl_transport, network_verdict

# NCCL 2.x INFO lines as a host writes them (NCCL_DEBUG_SUBSYS=INIT,NET), over EFA and after the fallback.
EFA_LOG = """\
algo-1:112:240 [0] NCCL INFO Bootstrap : Using eth0:10.0.143.12<0>
algo-1:112:240 [0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.13.2
algo-1:112:240 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)
algo-1:112:240 [0] NCCL INFO Using network AWS Libfabric
algo-1:112:251 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/AWS Libfabric/0/GDRDMA
"""
SOCKET_LOG = """\
algo-1:112:240 [0] NCCL INFO Bootstrap : Using eth0:10.0.143.12<0>
algo-1:112:240 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.
algo-1:112:240 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.143.12<0>
algo-1:112:240 [0] NCCL INFO Using network Socket
algo-1:112:251 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0
"""
ONE_HOST_LOG = """\
algo-1:112:240 [0] NCCL INFO Bootstrap : Using eth0:10.0.143.12<0>
algo-1:112:251 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC
"""


def test_efa_instances_get_what_aws_sets_and_rdma_only_where_it_does():
    p4d, p5, g5 = (nccl_environment(t) for t in ("ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.12xlarge"))
    assert p4d["FI_PROVIDER"] == p5["FI_PROVIDER"] == "efa"
    assert p4d["NCCL_PROTO"] == p5["NCCL_PROTO"] == "simple"
    assert (p4d["FI_EFA_USE_DEVICE_RDMA"], p4d["RDMAV_FORK_SAFE"]) == ("1", "1")
    assert "FI_EFA_USE_DEVICE_RDMA" not in p5  # not in SageMaker's RDMA list
    assert "FI_PROVIDER" not in g5  # the 12xlarge has no EFA
    assert all(env["NCCL_DEBUG"] == "INFO" and "%h" in env["NCCL_DEBUG_FILE"] for env in (p4d, p5, g5))


@pytest.mark.parametrize(("log", "transport"), [(EFA_LOG, "ofi"), (SOCKET_LOG, "socket"), (ONE_HOST_LOG, None)])
def test_the_transport_is_read_from_nccls_lines(log, transport):
    assert nccl_transport(log.splitlines()) == transport


def test_sockets_where_efa_is_expected_is_a_problem_naming_the_line():
    ok, finding = network_verdict(SOCKET_LOG.splitlines(), "ml.p4d.24xlarge", 2)
    assert ok is False and "'algo-1:112:240 [0] NCCL INFO NET/Socket : Using [0]eth0" in finding
    assert network_verdict(EFA_LOG.splitlines(), "ml.p4d.24xlarge", 2)[0] is True
    assert network_verdict(SOCKET_LOG.splitlines(), "ml.p4d.24xlarge", 1)[0] is None  # one host: no EFA needed
    assert network_verdict(SOCKET_LOG.splitlines(), "ml.g5.12xlarge", 2)[0] is None  # no EFA on this type


def test_the_check_reads_every_process_log_until_nccl_names_its_network(tmp_path):
    check = NetworkCheck("ml.p5.48xlarge", 2, str(tmp_path / "nccl-%h-%p.log"))
    check.check()
    assert check.ok is None  # nothing written yet: NCCL connects at the first collective
    (tmp_path / "nccl-algo-1-112.log").write_text(EFA_LOG)
    (tmp_path / "nccl-algo-1-113.log").write_text(SOCKET_LOG)  # one process of the host fell back
    with pytest.raises(NetworkFallback, match=r"network: NCCL fell back to TCP sockets .* 2 hosts of ml.p5.48xlarge"):
        check.check()
    assert check.ok is False
    (tmp_path / "nccl-algo-1-113.log").write_text(EFA_LOG)
    fine = NetworkCheck("ml.p5.48xlarge", 2, str(tmp_path / "nccl-%h-%p.log"))
    fine.check()
    assert fine.ok is True and "EFA (NET/OFI)" in fine.finding
