import pytest

from contract.batch import (
    MAX_BUBBLE,
    BatchError,
    accumulation_steps,
    bubble,
    global_batch,
    optimizer_steps,
    pipeline_microbatches,
    replicas,
)


def test_a_replica_is_one_per_pipeline_of_devices():
    assert replicas(8, 2) == 16 and replicas(8, 2, stages=2) == 8 and replicas(1, 4) == 4


def test_accumulation_reaches_the_global_batch():
    assert accumulation_steps(524_288, 8, 2_048, 8) == 4  # 8 x 2,048 x 8 x 4
    assert global_batch(8, 2_048, 8, 4) == 524_288
    assert accumulation_steps(0, 8, 2_048, 8) == 1  # 0: one micro-batch per replica
    with pytest.raises(BatchError, match=r"500,000 is not valid; expected a multiple of .* = 131,072 tokens"):
        accumulation_steps(500_000, 8, 2_048, 8)


def test_pipeline_passes_divide_the_micro_batches():
    assert pipeline_microbatches(16, 8) == 8
    assert pipeline_microbatches(16, 0) == 16
    with pytest.raises(BatchError, match="divisor of the 16 micro-batches"):
        pipeline_microbatches(16, 3)
    with pytest.raises(BatchError):
        pipeline_microbatches(16, -1)


def test_the_default_pass_is_the_fewest_micro_batches_that_bound_the_bubble():
    assert pipeline_microbatches(128, 0, stages=8) == 64  # gpt3-13b's default batch on 8 stages
    assert bubble(8, 64) == pytest.approx(7 / 71) and bubble(8, 64) <= MAX_BUBBLE < bubble(8, 32)
    assert pipeline_microbatches(16, 0, stages=4) == 16  # no divisor reaches 10%: the whole step, 3 / 19
    assert pipeline_microbatches(12, 0, stages=2) == 12  # 1 / 10 needs 9: 12 is the first divisor past it
    assert pipeline_microbatches(128, 0, stages=2) == 16  # 1 / 17
    assert pipeline_microbatches(128, 0) == 128  # no pipeline: one pass
    assert pipeline_microbatches(128, 4, stages=8) == 4  # as asked


def test_optimizer_steps_reach_the_token_budget():
    assert optimizer_steps(300_000_000_000, 1_048_576) == 286_103  # the last step reaches past 300 B
    assert optimizer_steps(4096 * 250, 4096) == 250
