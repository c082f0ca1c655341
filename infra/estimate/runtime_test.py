"""The time-limit check: the modelled training time with its margin against max_run_hours, at the boundary; the
margins are part of what must fit."""

from __future__ import annotations

import dataclasses
import math

import pytest

from infra.config import TrainingConfig
from infra.estimate import estimate_for_config, time_problem
from infra.estimate.estimate import estimate
from infra.estimate.report import describe
from infra.estimate.runtime import late_problem, needed_hours
from infra.training_code import model_presets


def dev():
    """gpt3-125m on one ml.g5.12xlarge, 1 B tokens: a few modelled hours."""
    return estimate(
        model_presets()["gpt3-125m"],
        vocab_size=50_257,
        sequence_length=2048,
        micro_batch_size=8,
        precision="bf16",
        recompute=True,
        instance_type="ml.g5.12xlarge",
        instance_count=1,
        global_batch_tokens=524_288,
        train_tokens=10**9,
    )


@pytest.mark.parametrize("spot", [False, True])
def test_a_run_needing_exactly_its_limit_finishes_and_a_hair_more_does_not(spot):
    p = dev()
    need = needed_hours(p, spot)
    assert late_problem(p, spot, need) is None  # <=, not <: the margin is already in the need
    assert late_problem(p, spot, need - 1e-9) is not None
    assert late_problem(p, spot, math.ceil(need)) is None


def test_the_need_is_the_modelled_time_with_its_margin():
    p = dev()
    assert needed_hours(p, spot=True) == pytest.approx(p.train_hours * 1.15 + 0.5)
    assert needed_hours(p, spot=False) == pytest.approx(p.train_hours * 1.05 + 0.5)
    assert p.train_hours == pytest.approx(10**9 / (524_288 / p.step.total) / 3600)
    message = late_problem(p, True, 1)
    assert f"at {p.modelled_mfu:.1%} MFU, modelled)" in message


PROD = dataclasses.replace(
    TrainingConfig(),
    model_preset="gpt3-1.3b",
    global_batch_tokens=1_048_576,
    micro_batch_size=4,
    instance_count=4,
    train_tokens=300_000_000_000,
    spot=True,
)


def test_the_margins_count_against_max_run_hours_not_only_the_training():
    train_hours = estimate_for_config(PROD, 50_257).train_hours  # about 219 h modelled, 253 h with the margins
    limit = math.ceil(train_hours) + 1
    training = dataclasses.replace(PROD, max_run_hours=limit)
    need = needed_hours(estimate_for_config(training, 50_257), True)
    assert train_hours < limit < need
    problem = time_problem(training, 50_257)
    assert problem is not None, f"a run needing {need:.1f} h was accepted with max_run_hours {limit}"
    assert problem.startswith(
        f"the run needs about {math.ceil(need)} h but training.max_run_hours is {limit}: {train_hours:.1f} h"
    )


def test_a_run_that_needs_exactly_its_max_run_hours_fits():
    result = estimate_for_config(dataclasses.replace(PROD, spot=False), 50_257)
    # One step a second, 36,000 steps: 10 h of training exactly, x 1.05 + 0.5 h = 11 h needed, exactly.
    inputs = dataclasses.replace(result.inputs, train_tokens=36_000 * result.inputs.global_batch_tokens)
    step = dataclasses.replace(result.step, matmul=0.0, memory=0.0, optimizer=1.0, allreduce_exposed=0.0)
    exact = dataclasses.replace(result, inputs=inputs, step=step)
    assert (exact.train_hours, needed_hours(exact, False)) == (10.0, 11.0)
    assert late_problem(exact, False, 11) is None
    assert "11 h needed (+5% checkpoints; 0.5 h start-up) of max_run_hours 11: finishes" in describe(exact, 11)
    refused = late_problem(exact, False, 10) or "accepted"
    assert refused.startswith("the run needs about 11 h but training.max_run_hours is 10")
