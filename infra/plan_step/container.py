"""What a job's container runs: a small init in front of the image's own entrypoint.

SageMaker stops a job (StopTrainingJob, a spot reclaim, a Step Functions stop or timeout) with SIGTERM to the
container's PID 1 and SIGKILL about 120 s later. In the TensorFlow image PID 1 is the toolkit's ``train``, as the
image's entrypoint script ends with ``exec "$@"``; it installs no SIGTERM handler, and a PID 1 without one never
receives a signal sent from outside its PID namespace (pid_namespaces(7)), so train.py never hears the stop.

``INIT`` is PID 1 instead (bash, which every image here has: the image's own entrypoint is a bash script). On
SIGTERM it runs ``FORWARD``: SIGTERM to every other process of the container but the command itself, or to the
command where there is no other. The toolkit must live on, as it relays train.py's output (a script whose pipe's
reader died fails on its next line, before its checkpoint), and it exits by itself once train.py has; a
processing command is a single process. The init reaps every child (orphans included), exits with the command's
status, and once it has passed a SIGTERM on it first waits for every other process. Not PID 1 (no PID namespace of
its own), it simply becomes the command. Two items, as botocore allows at most 256 characters in each.
"""

from __future__ import annotations

FORWARD = (
    "t=1; o=; for p in /proc/[0-9]*; do p=${p#/proc/}; case $p in 1|$c) ;; *) kill -TERM $p 2>/dev/null && o=1;; "
    'esac; done; [ "$o" ] || kill -TERM $c'
)
INIT = (
    '[ $$ = 1 ] || exec "${@:2}"; trap "$1" TERM; shift; "$@" & c=$!; wait $c; '
    "while kill -0 $c 2>/dev/null; do wait $c; done; wait $c; s=$?; "
    'while [ "$t" ] && kill -0 -1 2>/dev/null; do sleep 0.1; done; exit $s'
)
INIT_COMMAND = ["bash", "-c", INIT, "init", FORWARD]  # then the command, as arguments
# The TensorFlow DLC's ENTRYPOINT (aws/deep-learning-containers, docker/tensorflow/2.21/Dockerfile.*): kept in the
# chain, as its script sets up CUDA forward compatibility; SageMaker runs it with the argument ``train``.
IMAGE_ENTRYPOINT = ["bash", "-m", "/usr/local/bin/entrypoint.sh"]


def training_container(image_forwards_signals: bool) -> dict[str, list[str]]:
    """AlgorithmSpecification's ContainerEntrypoint/ContainerArguments: the init, then the image as SageMaker
    starts it; nothing for an image whose own entrypoint passes SIGTERM on (``training.image_forwards_signals``)."""
    if image_forwards_signals:
        return {}
    return {"ContainerEntrypoint": INIT_COMMAND, "ContainerArguments": [*IMAGE_ENTRYPOINT, "train"]}


def processing_entrypoint(command: list[str]) -> list[str]:
    """AppSpecification's ContainerEntrypoint: the init, the image's entrypoint, then ``command``."""
    return [*INIT_COMMAND, *IMAGE_ENTRYPOINT, *command]
