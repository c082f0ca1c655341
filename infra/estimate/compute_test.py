"""FLOPs per token, step time and all-reduce time."""

from __future__ import annotations

import pytest
from contract.presets import flops_per_token, get_preset  # the training package's own formula (no TensorFlow)

from infra.estimate import compute
from infra.presets import model_presets


@pytest.mark.parametrize("name", ["tiny", "gpt3-125m", "gpt3-13b"])
def test_model_flops_match_the_training_package(name):
    shape = model_presets()[name]
    n = shape.parameters(50_257, 2048)
    assert compute.model_flops_per_token(shape, n, 2048) == flops_per_token(
        get_preset(name), n_params=n, sequence_length=2048
    )


def test_recomputation_executes_four_thirds_of_the_model_flops():
    shape = model_presets()["gpt3-1.3b"]
    n = shape.parameters(50_257, 2048)
    model = compute.model_flops_per_token(shape, n, 2048)
    assert compute.hardware_flops_per_token(shape, n, 2048, recompute=False) == model
    assert compute.hardware_flops_per_token(shape, n, 2048, recompute=True) * 3 == model * 4


def test_pipeline_bubble():
    assert compute.pipeline_factor(1, 4) == 1
    assert compute.pipeline_factor(4, 4) == 7 / 4
    assert compute.pipeline_factor(2, 16) == 17 / 16


def test_compute_seconds_is_work_over_throughput():
    # 32,768 tokens x 1e10 FLOPs on a 312 TFLOPS device at 40%: 3.2768e14 / 1.248e14 = 2.626 s.
    assert compute.compute_seconds(32_768, 10**10, 1, 312e12, 0.4) == pytest.approx(2.6256, rel=1e-4)
    assert compute.compute_seconds(32_768, 10**10, 2, 312e12, 0.4) == pytest.approx(2.6256 / 2, rel=1e-4)


def test_allreduce_is_free_on_one_instance_and_a_ring_otherwise():
    assert compute.allreduce_seconds(10**9, 1, 400) == 0
    # 2 x 1/2 x 4 GB over 50 GB/s x 0.7 = 0.114 s
    assert compute.allreduce_seconds(10**9, 2, 400) == pytest.approx(4e9 / (50e9 * 0.7))
    assert compute.allreduce_seconds(10**9, 4, 100) > compute.allreduce_seconds(10**9, 4, 400)
