"""The time-limit check: the modelled training time with its margin against max_run_hours, at the boundary."""

from __future__ import annotations

import math

import pytest

from infra.estimate.estimate import estimate
from infra.estimate.runtime import late_problem, needed_hours
from infra.presets import model_presets


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
