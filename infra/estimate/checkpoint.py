"""Checkpoint saves: how long one takes, whether the stop checkpoint makes SageMaker's 120 s, what a reclaim loses.

A save holds the float32 weights and the AdamW moments, 12 bytes per parameter (the 16-bit copy and the
gradients are not saved; ``training/run/checkpoint.py``): 14.7 GiB for gpt3-1.3b, 144 GiB for gpt3-13b. Each
writing host writes its share to its disk (``WRITE_GIB_PER_SECOND``) and SageMaker's checkpoint sync uploads it
to S3 (``UPLOAD_SHARE`` of the instance's network); the two are added:

    save seconds = share / write rate + share / upload rate,    share = checkpoint bytes / hosts writing

Today only the chief writes (hosts writing = 1); issue 41 writes every save in parallel from every host, each its
share (hosts writing = instance count). StopTrainingJob and a spot reclaim send SIGTERM and end the container
about 120 s later (aws-facts.md): the stop checkpoint is whole when the step in flight and the save fit in that.
When it does not, the restart resumes from the newest periodic checkpoint and loses up to ``checkpoint_every``
steps. ``checkpoint_every_for`` chooses the interval that bounds that loss to a share of an hour.

Rates (assumed, not measured on AWS): TensorFlow wrote 0.24-2.47 GiB/s on this project's machine
(bench/stop_checkpoint_bench.py); SageMaker does not document its sync's rate.
"""

from __future__ import annotations

import dataclasses
import math

from infra.estimate.estimate import Estimate
from infra.estimate.memory import GIB

CHECKPOINT_BYTES_PER_PARAMETER = 12  # float32 weights + AdamW m and v
WRITE_GIB_PER_SECOND = 1.0  # per host: TensorFlow's checkpoint writer to the instance's disk (assumed)
UPLOAD_SHARE = 0.5  # of the instance's network bandwidth for SageMaker's upload to S3 (assumed)
STOP_GRACE_SECONDS = 120  # SIGTERM to the container's end on StopTrainingJob and spot reclaims
LOST_SHARE_OF_HOUR = 0.05  # what a reclaim may cost at most: 3 minutes of training per hour of it


@dataclasses.dataclass(frozen=True)
class Save:
    """One checkpoint save of a run. Bytes and seconds (modelled)."""

    size_bytes: int
    hosts_writing: int
    seconds: float
    step_seconds: float

    @property
    def stop_fits(self) -> bool:
        """Whether the step in flight and the stop checkpoint finish inside the 120 s after SIGTERM."""
        return self.step_seconds + self.seconds <= STOP_GRACE_SECONDS


def save_seconds(size_bytes: float, network_gbps: float, hosts_writing: int) -> float:
    """share / write rate + share / upload rate. gpt3-13b (144 GiB), chief alone at 400 Gbit/s:
    144 / 1.0 + 154.2 GB / 25 GB/s = 144 + 6.2 = 150 s; from 8 hosts: 18 + 0.8 = 18.8 s."""
    share = size_bytes / hosts_writing
    return share / (WRITE_GIB_PER_SECOND * GIB) + share / (network_gbps * 1e9 / 8 * UPLOAD_SHARE)


def checkpoint_save(result: Estimate, parallel: bool | None = None) -> Save:
    """The save of ``result``'s run, written by the chief alone or by every host (``parallel``; default: as its
    implementation writes them)."""
    if parallel is None:
        parallel = result.inputs.implementation.parallel_checkpoint
    size = result.parameters * CHECKPOINT_BYTES_PER_PARAMETER
    hosts = result.inputs.instance_count if parallel else 1
    seconds = save_seconds(size, result.inputs.instance.network_gbps, hosts)
    return Save(size, hosts, seconds, result.step_seconds)


def steps_a_stop_may_lose(save: Save, checkpoint_every: int) -> int | None:
    """0 when the stop checkpoint fits the grace period; otherwise up to a whole interval; None for
    ``checkpoint_every = 0`` (end only), where a stop loses every step since the start."""
    if save.stop_fits:
        return 0
    return checkpoint_every or None


def checkpoint_every_for(result: Estimate, save: Save, lost_share_of_hour: float) -> int:
    """The largest ``checkpoint_every`` whose whole interval is at most ``lost_share_of_hour`` of an hour of
    training, and never shorter than a save (saves must not queue up): e.g. 5% of an hour at 2.3 s a step ->
    floor(180 / 2.3) = 77 steps.

    A reclaim whose stop checkpoint fits the 120 s loses nothing, but one that comes during a save, or a torn
    upload, falls back to the interval before: the bound is on that.
    """
    if not 0 < lost_share_of_hour <= 1:
        raise ValueError(f"lost_share_of_hour {lost_share_of_hour}: expected a fraction in (0, 1]")
    longest = math.floor(lost_share_of_hour * 3600 / result.step_seconds)
    shortest = math.ceil(save.seconds / result.step_seconds)
    return max(longest, shortest, 1)


def summary(result: Estimate) -> dict[str, object]:
    """The save's figures for the Plan step's summary: size, seconds by the chief alone and by every host, the
    stop verdict, and the ``checkpoint_every`` for ``LOST_SHARE_OF_HOUR``."""
    chief, parallel, used = checkpoint_save(result, False), checkpoint_save(result, True), checkpoint_save(result)
    return {
        "size_gib": round(used.size_bytes / GIB, 2),
        "save_seconds_chief_alone": round(chief.seconds, 1),
        "save_seconds_every_host": round(parallel.seconds, 1),
        "hosts_writing": used.hosts_writing,
        "stop_checkpoint_fits_120_s": used.stop_fits,
        "checkpoint_every_for_5_percent_of_an_hour": checkpoint_every_for(result, used, LOST_SHARE_OF_HOUR),
    }
