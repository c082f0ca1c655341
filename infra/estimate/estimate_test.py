"""Estimates: fit, time, cost, suggestions and the config entry points."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from infra.config import TrainingConfig
from infra.estimate import estimate, estimate_for_config, fit_problem, suggestions, with_suggestions
from infra.estimate.layouts import least_recompute
from infra.estimate.step_time import AFTER, REFERENCE
from infra.instances import INSTANCE_TYPES, SPOT_DISCOUNT
from infra.training_code import model_presets

PRESETS = model_presets()


def prod(**overrides):
    """The prod stage's layout: gpt3-1.3b on 4 x ml.p4d.24xlarge, micro-batch 4, 1 M-token batches."""
    args = {
        "vocab_size": 50_257,
        "sequence_length": 2048,
        "micro_batch_size": 4,
        "precision": "bf16",
        "recompute": True,
        "instance_type": "ml.p4d.24xlarge",
        "instance_count": 4,
        "global_batch_tokens": 1_048_576,
        "train_tokens": 300_000_000_000,
        **overrides,
    }
    return estimate(PRESETS["gpt3-1.3b"], **args)


def test_published_facts_1_3b_with_adam():
    """Does not fit a V100-16GB with plain data parallelism; fits an A100-40GB with recomputation."""
    for recompute in (False, True):
        assert not prod(instance_type="ml.p3.16xlarge", precision="fp16", recompute=recompute, micro_batch_size=1).fits
    assert prod(recompute=True).fits
    assert not prod(recompute=False).fits


def test_throughput_time_and_cost_are_consistent():
    p = prod()
    assert p.inputs.data_parallel_degree == 32
    assert p.inputs.accumulation_steps == 4  # 512 sequences / (4 x 32)
    assert p.tokens_per_second == pytest.approx(1_048_576 / p.step_seconds)
    assert p.train_hours == pytest.approx(300e9 / p.tokens_per_second / 3600)
    price = INSTANCE_TYPES["ml.p4d.24xlarge"].price_per_hour
    assert p.cost_on_demand == pytest.approx(p.train_hours * 4 * price)
    assert p.cost_spot == pytest.approx(p.cost_on_demand * (1 - SPOT_DISCOUNT))
    assert p.modelled_mfu == pytest.approx(p.tokens_per_second * p.model_flops_per_token / (32 * 312e12))
    assert 0.3 < p.modelled_mfu < 0.5  # modelled: 34.7% (step_time.py)


def test_more_instances_shorten_compute_but_add_network_time():
    one, four = prod(instance_count=1), prod(instance_count=4)  # the all-reduce after the backward pass
    assert one.step.allreduce < four.step.allreduce  # NVLink only, then EFA too
    assert four.allreduce_seconds == four.step.allreduce
    assert four.step.micro_batch == pytest.approx(one.step.micro_batch)
    assert four.step.accumulation_steps * 4 == one.step.accumulation_steps
    # Overlapped (the reference's buckets), the last micro-batch's backward pass hides the all-reduce.
    assert prod(implementation=REFERENCE).allreduce_seconds < prod(implementation=REFERENCE).step.allreduce


def test_recomputation_trades_memory_for_time():
    on, off = prod(recompute=True), prod(recompute=False)
    assert on.memory.activations < off.memory.activations / 5
    assert on.step.matmul == pytest.approx(off.step.matmul * on.hardware_flops_per_token / off.hardware_flops_per_token)
    assert on.step_seconds > off.step_seconds


def test_invalid_layouts_raise():
    with pytest.raises(ValueError, match="model_parallel_degree 3: expected a divisor of the 8 devices"):
        prod(model_parallel_degree=3)
    with pytest.raises(ValueError, match="global_batch_tokens 1,048,576 is not valid; expected a multiple"):
        prod(micro_batch_size=3)
    with pytest.raises(ValueError, match="precision 'fp8'"):
        prod(precision="fp8")
    with pytest.raises(ValueError, match="optimizer 'lamb'"):
        prod(optimizer="lamb")


def test_suggestions_fit_and_start_with_the_smallest_change():
    misfit = prod(recompute=False)
    fixes = suggestions(misfit)
    assert fixes and all(fix.estimate.fits for fix in fixes)
    assert fixes[0].changes == (("recompute", True),)
    assert str(fixes[0]).startswith("training.recompute = true (29.7 of 37.6 GiB usable")
    assert [len(f.changes) for f in fixes] == sorted(len(f.changes) for f in fixes)
    assert suggestions(prod()) == []


def test_a_v100_cluster_needs_pipeline_stages_or_a_larger_gpu():
    fixes = suggestions(prod(instance_type="ml.p3.16xlarge", precision="fp16", recompute=False, instance_count=8))
    singles = [dict(f.changes) for f in fixes if len(f.changes) == 1]
    # model state alone is 27 GiB: a larger GPU, or (uncompiled fp16 logits at 8 bytes since issue 37) 8 stages
    assert singles and all({"instance_type", "model_parallel_degree"} & set(change) for change in singles)
    assert any(dict(f.changes).get("model_parallel_degree", 1) > 1 for f in fixes)
    # bf16 is never offered on a V100.
    bf16 = suggestions(prod(recompute=False))
    assert all(INSTANCE_TYPES[f.estimate.inputs.instance_type].supports_bf16 for f in bf16)


def test_estimate_for_config_reads_the_training_config_and_its_overrides():
    config = TrainingConfig(model_preset="gpt3-125m", n_layer=6, instance_type="ml.g5.12xlarge", recompute=False)
    p = estimate_for_config(config, vocab_size=32_000)
    assert p.inputs.shape.n_layer == 6 and p.inputs.shape.d_model == 768
    assert p.parameters == p.inputs.shape.parameters(32_000, 2048)
    assert p.inputs.data_parallel_degree == config.data_parallel_replicas == 4
    assert p.inputs.implementation is AFTER


def test_fit_problem_names_the_need_the_capacity_and_the_fix():
    assert fit_problem(TrainingConfig(), 50_257) is None
    problem = fit_problem(dataclasses.replace(TrainingConfig(), recompute=False, micro_batch_size=16), 50_257)
    assert problem.startswith("gpt3-125m at micro-batch 16 x 2048 tokens needs 46.0 GiB per device")
    assert "but ml.p4d.24xlarge has 37.6 GiB usable per device (40 GiB marketed). Set training.recompute" in problem


def test_a_cpu_run_is_offered_cpu_layouts_only():
    local = dataclasses.replace(
        TrainingConfig(), model_preset="gpt3-350m", instance_type="ml.m5.xlarge", recompute=False, precision="fp32"
    )
    problem = fit_problem(local, 4096)
    assert "but ml.m5.xlarge has 16.0 GiB usable per device (16 GiB marketed). Set" in problem
    offered = re.findall(r"instance_type = '([^']+)'", problem)
    assert offered and all(not INSTANCE_TYPES[name].is_gpu for name in offered)


def test_with_suggestions_is_json():
    summary = json.loads(json.dumps(with_suggestions(prod(recompute=False))))
    assert summary["fits"] is False
    assert summary["memory_gib"]["total"] > summary["capacity_gib"] == 37.59 and summary["marketed_gib"] == 40
    assert summary["suggestions"][0].startswith("training.recompute = true")


def test_pipeline_divides_memory_by_stages_and_pays_the_gpipe_bubble():
    # 1 M tokens / (2048 x 4 x 16 replicas) = 8 micro-batches per replica and step with K = 2.
    flat, piped = prod(), prod(model_parallel_degree=2)
    assert (piped.inputs.data_parallel_degree, piped.inputs.accumulation_steps) == (16, 8)
    assert piped.inputs.pipeline_microbatches == 8  # microbatches 0: the whole step in one GPipe pass
    assert piped.memory.model_state < flat.memory.model_state * 0.7  # blocks 11 | 13, embeddings on stage 0, buffers
    assert piped.memory.gradient_buffers > 0 == flat.memory.gradient_buffers
    assert piped.step.bubble_factor == 9 / 8 and piped.bubble == 1 / 9  # (K - 1) / (M + K - 1)
    assert piped.as_dict()["pipeline_bubble"] == round(1 / 9, 4) and flat.as_dict()["pipeline_bubble"] == 0
    # Per micro-batch each stage runs half the layers' matmuls, and its forward once more (re-materialisation).
    again = piped.hardware_flops_per_token / flat.hardware_flops_per_token
    assert again > 1.2
    assert piped.step.matmul == pytest.approx(flat.step.matmul / 2 * again)
    two = prod(model_parallel_degree=2, microbatches=2)  # 4 passes of 2: more bubble, fewer activations held
    assert two.step.bubble_factor == 3 / 2 and two.bubble == 1 / 3
    assert two.step_seconds > piped.step_seconds
    assert two.memory.activations < piped.memory.activations
    assert two.as_dict()["microbatches"] == 2
    with pytest.raises(ValueError, match="microbatches 3 is not valid; expected 0 or a divisor of the 8 micro-batches"):
        prod(model_parallel_degree=2, microbatches=3)


def test_the_least_recomputation_that_fits_is_chosen_by_executed_flops():
    assert least_recompute(prod().inputs) == "full"  # mb 4 on an A100-40GB: neither selective mode fits
    assert least_recompute(prod(instance_type="ml.p5.48xlarge").inputs) == "none"
    assert least_recompute(prod(micro_batch_size=1).inputs) == "none"
    assert least_recompute(prod(micro_batch_size=2).inputs) == "attention"  # fewer FLOPs than the MLP's at s < 2d
    assert least_recompute(prod(preset="gpt3-1.3b", instance_type="ml.p3.16xlarge", precision="fp16").inputs) is None
