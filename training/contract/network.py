"""NCCL between hosts over EFA: the environment a training job sets, and the rule that reads which network NCCL took.

What AWS sets for NCCL over EFA on SageMaker, where its own launchers start the job (aws/sagemaker-training-
toolkit, ``src/sagemaker_training/mpi.py`` and ``torch_distributed.py``; the instance lists as in
aws/sagemaker-python-sdk, ``src/sagemaker/modules/train/container_drivers/common/utils.py``):

    instances in SM_EFA_NCCL_INSTANCES    FI_PROVIDER=efa                 libfabric's EFA provider
                                          NCCL_PROTO=simple               "to handle the out-of-order data delivery
                                                                          from EFA"
    instances in SM_EFA_RDMA_INSTANCES    FI_EFA_USE_DEVICE_RDMA=1        "EFA's RDMA functionality for one-sided
                                          RDMAV_FORK_SAFE=1               and two-sided transfer" (p4d, p4de)

The TensorFlow image's MultiWorkerMirroredStrategy launch (the toolkit writes TF_CONFIG and starts one process
per host) sets none of them, so the training request's Environment does (``infra/plan_step/requests.py``). The
image's NCCL finds EFA through the aws-ofi-nccl plugin it ships; if the plugin or the provider fails to load,
NCCL falls back to TCP sockets without an error, an order of magnitude slower between hosts. NCCL says which
network it took at INFO level: ``NCCL_DEBUG=INFO`` for the INIT and NET subsystems only, into a file per
process (``NCCL_DEBUG_FILE``: %h host, %p process), which :func:`network_verdict` reads.

Standard library only: infra loads this file (``infra/training_code.py``).
"""

from __future__ import annotations

import glob
import re

# SM_EFA_NCCL_INSTANCES and SM_EFA_RDMA_INSTANCES of the SageMaker Python SDK's container drivers (above).
EFA_INSTANCES = (
    "ml.g4dn.8xlarge", "ml.g4dn.12xlarge", "ml.g5.48xlarge", "ml.p3dn.24xlarge",
    "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.trn1.32xlarge",
)  # fmt: skip
EFA_RDMA_INSTANCES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.trn1.32xlarge")
NCCL_LOG = "/tmp/nccl-%h-%p.log"  # NCCL_DEBUG_FILE: NCCL expands %h (host) and %p (process id)

# NCCL's own lines: "NCCL INFO NET/OFI Selected Provider is efa", "NCCL INFO Using network AWS Libfabric",
# "NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/0/GDRDMA"; on the fallback
# "NCCL INFO NET/Socket : Using [0]eth0:10.0.0.12<0>", "NCCL INFO Using network Socket", "... via NET/Socket/0".
_OFI = re.compile(r"NET/OFI|Using network (AWS )?Libfabric|via NET/(AWS )?Libfabric")
_SOCKET = re.compile(r"Using network Socket|via NET/Socket|NET/Socket : Using")


def nccl_environment(instance_type: str) -> dict[str, str]:
    """The Environment entries for NCCL on ``instance_type``: AWS's EFA settings where it has EFA, and the
    INFO lines of NCCL's network choice (any GPU type: the rule reads them)."""
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_DEBUG_FILE": NCCL_LOG}
    if instance_type in EFA_INSTANCES:
        env.update(FI_PROVIDER="efa", NCCL_PROTO="simple")
    if instance_type in EFA_RDMA_INSTANCES:
        env.update(FI_EFA_USE_DEVICE_RDMA="1", RDMAV_FORK_SAFE="1")
    return env


def expects_efa(instance_type: str, hosts: int) -> bool:
    """NCCL should reach the other hosts over EFA: several hosts of a type with EFA."""
    return hosts > 1 and instance_type in EFA_INSTANCES


def nccl_transport(lines: list[str]) -> str | None:
    """ "socket" if NCCL took TCP sockets for any communicator, "ofi" if only EFA (aws-ofi-nccl), None if the
    lines say neither (one host: NCCL's peers are all local)."""
    if any(_SOCKET.search(line) for line in lines):
        return "socket"
    return "ofi" if any(_OFI.search(line) for line in lines) else None


def network_verdict(lines: list[str], instance_type: str, hosts: int) -> tuple[bool | None, str]:
    """(ok, finding) of the "network" rule: False when EFA is expected and NCCL fell back to sockets."""
    transport = nccl_transport(lines)
    if not expects_efa(instance_type, hosts):
        return None, f"{hosts} host(s) of {instance_type}: no EFA between hosts expected (NCCL: {transport or '-'})"
    if transport == "socket":
        found = next(line.strip() for line in lines if _SOCKET.search(line))
        return False, (
            f"NCCL fell back to TCP sockets (NET/Socket) between {hosts} hosts of {instance_type}, where EFA "
            f"(NET/OFI) is expected: {found!r}"
        )
    if transport is None:
        return None, "no NCCL network line yet (NCCL_DEBUG=INFO; NCCL connects at the first collective)"
    return True, f"NCCL reaches the other hosts over EFA (NET/OFI) on {instance_type}"


class NetworkFallback(RuntimeError):
    """NCCL took TCP sockets where EFA is expected: the job stops rather than train at socket speed."""


class NetworkCheck:
    """The "network" rule on this host's NCCL log, read until NCCL has named the network it took.

    Args:
        instance_type, hosts: the job's (SageMaker: SM_CURRENT_INSTANCE_TYPE, SM_HOSTS).
        log_pattern: NCCL_DEBUG_FILE, its %h and %p read as wildcards.
    """

    ADVICE = (
        "check the image's aws-ofi-nccl plugin and libfabric (FI_PROVIDER=efa; the stock TensorFlow image ships "
        "both) and that the jobs' security group lets the hosts reach each other on every port"
    )

    def __init__(self, instance_type: str, hosts: int, log_pattern: str = NCCL_LOG):
        self.instance_type, self.hosts, self.log_pattern = instance_type, hosts, log_pattern
        self.ok: bool | None = None
        self.finding = "no NCCL log read yet"
        self.decided = False

    def check(self) -> None:
        """Reads the log if undecided; raises NetworkFallback if NCCL fell back to sockets where EFA is expected."""
        if self.decided:
            return
        expected = expects_efa(self.instance_type, self.hosts)
        lines = self._lines() if expected else []  # no EFA expected: no log is read (nor an old one of /tmp)
        self.ok, self.finding = network_verdict(lines, self.instance_type, self.hosts)
        self.decided = self.ok is not None or not expected
        if self.ok is False:
            raise NetworkFallback(f"network: {self.finding}; {self.ADVICE}")

    def _lines(self) -> list[str]:
        lines: list[str] = []
        for path in sorted(glob.glob(self.log_pattern.replace("%h", "*").replace("%p", "*"))):
            with open(path, encoding="utf-8", errors="replace") as file:
                lines.extend(file)
        return lines
