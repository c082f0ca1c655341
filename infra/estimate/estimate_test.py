"""Estimates: fit, time, cost, suggestions and the config entry points."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from infra.config import TrainingConfig
from infra.estimate import estimate, estimate_for_config, fit_problem, suggestions, with_suggestions
from infra.instances import INSTANCE_TYPES, SPOT_DISCOUNT
from infra.presets import model_presets

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
    assert 0 < p.achieved_mfu < p.inputs.mfu  # recomputation and the all-reduce cost utilisation


def test_more_instances_shorten_compute_but_add_network_time():
    one, four = prod(instance_count=1, micro_batch_size=4), prod(instance_count=4)
    assert one.allreduce_seconds == 0 < four.allreduce_seconds
    assert four.compute_seconds == pytest.approx(one.compute_seconds / 4)


def test_recomputation_trades_memory_for_time():
    on, off = prod(recompute=True), prod(recompute=False)
    assert on.memory.activations < off.memory.activations / 5
    assert on.compute_seconds == pytest.approx(off.compute_seconds * 4 / 3)


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
    assert str(fixes[0]).startswith("training.recompute = true (38.4 of 40 GiB")
    assert [len(f.changes) for f in fixes] == sorted(len(f.changes) for f in fixes)
    assert suggestions(prod()) == []


def test_a_v100_cluster_needs_pipeline_stages_or_a_larger_gpu():
    fixes = suggestions(prod(instance_type="ml.p3.16xlarge", precision="fp16", recompute=False, instance_count=8))
    singles = [dict(f.changes) for f in fixes if len(f.changes) == 1]
    assert singles and all("instance_type" in change for change in singles)  # model state alone is 27 GiB
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
    assert p.inputs.mfu == 0.4


def test_fit_problem_names_the_need_the_capacity_and_the_fix():
    assert fit_problem(TrainingConfig(), 50_257) is None
    problem = fit_problem(dataclasses.replace(TrainingConfig(), recompute=False), 50_257)
    assert problem.startswith("gpt3-125m at micro-batch 8 x 2048 tokens needs 43.7 GiB per device")
    assert "but ml.p4d.24xlarge has 40 GiB. Set training.recompute = true" in problem


def test_a_cpu_run_is_offered_cpu_layouts_only():
    local = dataclasses.replace(
        TrainingConfig(), model_preset="gpt3-350m", instance_type="ml.m5.xlarge", recompute=False, precision="fp32"
    )
    problem = fit_problem(local, 4096)
    assert "but ml.m5.xlarge has 16 GiB. Set" in problem
    offered = re.findall(r"instance_type = '([^']+)'", problem)
    assert offered and all(not INSTANCE_TYPES[name].is_gpu for name in offered)


def test_with_suggestions_is_json():
    summary = json.loads(json.dumps(with_suggestions(prod(recompute=False))))
    assert summary["fits"] is False
    assert summary["memory_gib"]["total"] > summary["capacity_gib"] == 40
    assert summary["suggestions"][0].startswith("training.recompute = true")


def test_pipeline_divides_memory_by_stages_and_pays_the_gpipe_bubble():
    # 1 M tokens / (2048 x 4 x 16 replicas) = 8 micro-batches per replica and step with K = 2.
    flat, piped = prod(), prod(model_parallel_degree=2)
    assert (piped.inputs.data_parallel_degree, piped.inputs.accumulation_steps) == (16, 8)
    assert piped.inputs.pipeline_microbatches == 8  # microbatches 0: the whole step in one GPipe pass
    assert piped.memory.model_state < flat.memory.model_state * 0.6  # blocks 11 | 13 and the embeddings on stage 0
    # Per replica, K = 2 devices share half the compute each, plus the bubble: (M + K - 1) / M = 9 / 8.
    per_device_flat = flat.compute_seconds / (flat.inputs.accumulation_steps)
    per_device_piped = piped.compute_seconds / (piped.inputs.accumulation_steps * 9 / 8)
    assert per_device_piped == pytest.approx(per_device_flat / 2)
    two = prod(model_parallel_degree=2, microbatches=2)  # 4 passes of 2: more bubble, fewer activations held
    assert two.compute_seconds == pytest.approx(piped.compute_seconds * (3 / 2) / (9 / 8))
    assert two.memory.activations < piped.memory.activations
    assert two.as_dict()["microbatches"] == 2
    with pytest.raises(ValueError, match="microbatches 3 is not valid; expected 0 or a divisor of the 8 micro-batches"):
        prod(model_parallel_degree=2, microbatches=3)
