"""Will the run finish inside its MaxRuntime? The modelled training time, with a margin, against ``max_run_hours``.

SageMaker stops a training job at ``StoppingCondition.MaxRuntimeInSeconds`` (at most 28 days, botocore's
documentation of the field), finished or not: a run planned past it pays for nearly all of its compute and
ends without its model. The training time is the modelled step time's (``step_time.py``), not an assumed MFU.
The margin covers what the step-time model leaves out:

    needed hours = train hours x (1 + 5% checkpoint writes + 10% work redone after spot interruptions) + 0.5 h

The 0.5 h is start-up (instances, image, data source, first compilation). Waiting for spot capacity counts
against MaxWaitTimeInSeconds, not MaxRuntime, so it is not in the sum. A run needing exactly its limit
finishes (``<=``): the margin is already in the need.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Protocol

from infra.aws_limits import SAGEMAKER_MAX_RUN_HOURS
from infra.estimate.estimate import Estimate, TrainingFields, estimate_for_config, estimate_inputs

START_UP_HOURS = 0.5
CHECKPOINT_MARGIN = 0.05
SPOT_MARGIN = 0.10
MAX_INSTANCES_TRIED = 64


class RunFields(TrainingFields, Protocol):
    """The training fields the time check reads besides the estimate's."""

    spot: bool
    max_run_hours: int


def margin(spot: bool) -> float:
    """The share added to the training time: checkpoints, and spot interruptions' redone work."""
    return CHECKPOINT_MARGIN + (SPOT_MARGIN if spot else 0.0)


def needed_hours(result: Estimate, spot: bool) -> float:
    """The MaxRuntime a run needs: train hours x (1 + margin) + start-up, e.g. 100 h x 1.15 + 0.5 = 115.5 h."""
    return result.train_hours * (1 + margin(spot)) + START_UP_HOURS


def finishes(result: Estimate, spot: bool, limit: float) -> bool:
    """Whether the run fits a MaxRuntime of ``limit`` hours; one that needs exactly ``limit`` does (its margin is in
    the need)."""
    return needed_hours(result, spot) <= limit


def time_problem(training: RunFields, vocab_size: int) -> str | None:
    """None when the run fits ``max_run_hours``; otherwise a sentence naming both numbers and the fixes."""
    return late_problem(estimate_for_config(training, vocab_size), training.spot, training.max_run_hours)


def late_problem(result: Estimate, spot: bool, limit: int) -> str | None:
    """``time_problem`` for an estimate (any implementation or optimizer), its spot setting and MaxRuntime in hours."""
    if finishes(result, spot, limit):
        return None
    need = needed_hours(result, spot)
    usable = (limit - START_UP_HOURS) / (1 + margin(spot))
    fits_tokens = max(int(result.tokens_per_second * usable * 3600), 0)
    fixes = []
    if need <= SAGEMAKER_MAX_RUN_HOURS:
        fixes.append(f"training.max_run_hours = {math.ceil(need)} (SageMaker allows up to {SAGEMAKER_MAX_RUN_HOURS})")
    fixes.append(f"training.train_tokens = {_count(fits_tokens)} (what {limit} h trains)")
    if (more := _instances_that_fit(result, spot, limit)) is not None:
        fixes.append(f"training.instance_count = {more}")
    inputs = result.inputs
    return (
        f"the run needs about {math.ceil(need):,} h but training.max_run_hours is {limit}: "
        f"{result.train_hours:,.1f} h of training ({_count(inputs.train_tokens)} tokens at "
        f"{result.modelled_mfu:.1%} MFU, modelled) + "
        f"{margin(spot):.0%} for checkpoints{' and spot restarts' if spot else ''} + "
        f"{START_UP_HOURS} h start-up. SageMaker would stop the job unfinished after about "
        f"{dollars(limit * inputs.instance_count * inputs.instance.price_per_hour)} on demand "
        f"({limit} h x {inputs.instance_count} x ${inputs.instance.price_per_hour:,.2f}/h). "
        f"Set {'; or '.join(fixes)}."
    )


def dollars(amount: float) -> str:
    """``$27,390``, or with cents below $100 (``$0.46``: two small instances for an hour, not ``$0``)."""
    return f"${amount:,.0f}" if amount >= 100 else f"${amount:,.2f}"


def _instances_that_fit(result: Estimate, spot: bool, limit: float) -> int | None:
    """The fewest instances (more than now) whose run fits ``limit`` hours and memory; None when none up to 64."""
    for count in range(result.inputs.instance_count + 1, MAX_INSTANCES_TRIED + 1):
        try:
            candidate = estimate_inputs(dataclasses.replace(result.inputs, instance_count=count))
        except ValueError:
            continue  # the global batch does not split over this many replicas
        if candidate.fits and finishes(candidate, spot, limit):
            return count
    return None


def _count(tokens: float) -> str:
    """300e9 -> '300B', 2.29e11 -> '229B', 5e6 -> '5M' (the form every token count in the input accepts)."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if tokens >= scale:
            return f"{math.floor(tokens / scale * 10) / 10:g}{unit}"
    return str(int(tokens))
