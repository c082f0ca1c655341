"""FLOPs per token by recompute mode, the GPipe bubble and the hierarchical all-reduce."""

from __future__ import annotations

import pytest
from contract.presets import flops_per_token, get_preset  # the training package's own formula (no TensorFlow)

from infra.estimate import compute
from infra.instances import INSTANCE_TYPES
from infra.training_code import model_presets

P4D, P5, G5 = (INSTANCE_TYPES[n] for n in ("ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.12xlarge"))


@pytest.mark.parametrize("name", ["tiny", "gpt3-125m", "gpt3-13b"])
def test_model_flops_match_the_training_package(name):
    shape = model_presets()[name]
    n = shape.parameters(50_257, 2048)
    assert compute.model_flops_per_token(shape, n, 2048) == flops_per_token(
        get_preset(name), n_params=n, sequence_length=2048
    )


def test_recomputation_runs_the_recomputed_part_of_every_block_again_not_the_head():
    shape = model_presets()["gpt3-1.3b"]
    n, d, layers = shape.parameters(50_257, 2048), 2048, 24
    model = compute.model_flops_per_token(shape, n, 2048)
    executed = {mode: compute.hardware_flops_per_token(shape, n, 2048, mode) for mode in ("none", "attention", "mlp")}
    scores = 4 * layers * 2048 * d
    assert compute.hardware_flops_per_token(shape, n, 2048, False) == executed["none"] == model
    # Full: every block's weights (12d² + 13d) and scores again, not the 103 M-parameter embedding and head.
    assert compute.hardware_flops_per_token(shape, n, 2048, True) == model + 2 * (12 * d * d + 13 * d) * layers + scores
    assert round(compute.hardware_flops_per_token(shape, n, 2048, "full") / 1e9, 2) == 11.92  # not 4/3 x 9.10
    assert executed["attention"] == model + 2 * 4 * d * d * layers + scores
    assert executed["mlp"] == model + 2 * 8 * d * d * layers
    # The attention's recomputation is cheaper than the MLP's while s < 2d, dearer beyond.
    assert executed["attention"] < executed["mlp"]
    assert compute.recompute_flops_per_token(shape, 8192, "attention") > compute.recompute_flops_per_token(
        shape, 8192, "mlp"
    )
    with pytest.raises(ValueError, match="recompute: 'some' is not valid"):
        compute.recompute_flops_per_token(shape, 2048, "some")


def test_pipeline_bubble():
    assert compute.pipeline_factor(1, 4) == 1
    assert compute.pipeline_factor(4, 4) == 7 / 4
    assert compute.pipeline_factor(2, 16) == 17 / 16
    assert compute.bubble_share(4, 4) == 3 / 7
    assert compute.bubble_share(8, 32) == 7 / 39
    assert compute.bubble_share(1, 1) == 0


def test_the_all_reduce_is_nvlink_inside_an_instance_and_a_ring_over_efa_between_them():
    size = 1.3e9 * 4
    assert compute.allreduce_seconds(size, size, P4D, 1, 1) == 0  # one replica
    inside = 2 * 7 / 8 * size / 230e9  # NVLink bus bandwidth of a p4d
    assert compute.allreduce_seconds(size, size, P4D, 1, 8) == pytest.approx(inside)
    between = 2 * 3 / 4 * size / (400e9 / 8 * 0.7)  # 4 instances, 400 Gbit/s EFA at 70%
    assert compute.allreduce_seconds(size, size, P4D, 4, 8) == pytest.approx(inside + between)
    # p5's 3,200 Gbit/s: the network share falls 8-fold; bfloat16 halves the bytes and the time.
    assert compute.allreduce_seconds(size, size, P5, 4, 8) < compute.allreduce_seconds(size, size, P4D, 4, 8) / 4
    half = compute.allreduce_seconds(size / 2, size / 2, P4D, 4, 8)
    assert half == pytest.approx(compute.allreduce_seconds(size, size, P4D, 4, 8) / 2)
    # A pipeline stage's replicas share NVLink with a stage's bytes, the network with one copy of every stage.
    piped = compute.allreduce_seconds(size / 4, size, P4D, 4, 2)
    assert piped == pytest.approx(2 * 1 / 2 * size / 4 / 230e9 + between)
    assert compute.allreduce_seconds(size, size, G5, 1, 4) > 10 * compute.allreduce_seconds(size, size, P4D, 1, 4)
