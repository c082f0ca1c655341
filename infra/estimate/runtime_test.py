"""The time check: the margins are part of what must fit in ``max_run_hours``, and a run that needs exactly it fits."""

from __future__ import annotations

import dataclasses

from infra.config import TrainingConfig
from infra.estimate import estimate_for_config, time_problem
from infra.estimate.report import describe
from infra.estimate.runtime import late_problem, needed_hours

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
    training = dataclasses.replace(PROD, max_run_hours=300)
    result = estimate_for_config(training, 50_257)
    assert result.train_hours < 300 < needed_hours(result, True)  # 271.2 h of training, 312.3 h needed
    problem = time_problem(training, 50_257)
    assert problem is not None, "a run needing 312.3 h was accepted with max_run_hours 300"
    assert problem.startswith("the run needs about 313 h but training.max_run_hours is 300: 271.2 h")


def test_a_run_that_needs_exactly_its_max_run_hours_fits():
    result = estimate_for_config(dataclasses.replace(PROD, spot=False), 50_257)
    # One step a second, 36,000 steps: 10 h of training exactly, x 1.05 + 0.5 h = 11 h needed, exactly.
    inputs = dataclasses.replace(result.inputs, train_tokens=36_000 * result.inputs.global_batch_tokens)
    exact = dataclasses.replace(result, inputs=inputs, compute_seconds=1.0, allreduce_seconds=0.0)
    assert (exact.train_hours, needed_hours(exact, False)) == (10.0, 11.0)
    assert late_problem(exact, False, 11) is None
    assert "11 h needed (+5% checkpoints; 0.5 h start-up) of max_run_hours 11: finishes" in describe(exact, 11)
    refused = late_problem(exact, False, 10) or "accepted"
    assert refused.startswith("the run needs about 11 h but training.max_run_hours is 10")
