"""The memory model: bytes per parameter, activations, logits and the published fits."""

from __future__ import annotations

import pytest

from infra.estimate.memory import (
    GIB,
    activation_bytes,
    backward_workspace_bytes,
    device_memory,
    in_flight_micro_batches,
    layer_activation_bytes,
    logits_bytes,
    stage_parameters,
    state_bytes_per_parameter,
)
from infra.presets import model_presets

PRESETS = model_presets()


@pytest.mark.parametrize(
    ("precision", "optimizer", "accumulate", "total"),
    [
        ("bf16", "adamw", False, 18),
        ("fp16", "adam", True, 22),
        ("fp32", "adamw", False, 16),
        ("fp32", "sgd", False, 12),
    ],
)
def test_model_state_bytes_per_parameter(precision, optimizer, accumulate, total):
    assert sum(state_bytes_per_parameter(precision, optimizer, accumulate).values()) == total


def test_stage_parameters_match_the_closed_form_count_and_split_the_blocks():
    shape = PRESETS["gpt3-1.3b"]
    assert stage_parameters(shape, 50_257, 2048, 1) == shape.parameters(50_257, 2048)
    # 4 stages of 4 | 7 | 7 | 6 blocks (50.36 M each), the 107.1 M embeddings on the first: the middle ones are
    # the heaviest. Splitting by layer count alone (6 each, embeddings on top) would put 409 M on the first.
    assert stage_parameters(shape, 50_257, 2048, 4) == 7 * 50_358_272
    # 5 stages: 3 | 6 | 5 | 5 | 5 blocks -> 6 on the second (302 M) vs the first's 3 x 50.4 + 107.1 = 258 M.
    assert stage_parameters(shape, 50_257, 2048, 5) == 6 * 50_358_272


def test_layer_activations_follow_korthikanti_and_double_in_fp32():
    shape = PRESETS["gpt3-125m"]  # s·b·h·(34 + 5·a·s/h) with s=2048, b=8, h=768, a=12: 12.58 M x 194
    assert layer_activation_bytes(shape, 2048, 8, "bf16") == 2048 * 8 * 768 * 194
    assert layer_activation_bytes(shape, 2048, 8, "fp32") == 2 * 2048 * 8 * 768 * 194
    assert layer_activation_bytes(shape, 2048, 4, "bf16") * 2 == layer_activation_bytes(shape, 2048, 8, "bf16")


def test_recomputation_keeps_layer_inputs_and_one_full_layer():
    shape = PRESETS["gpt3-125m"]
    full = layer_activation_bytes(shape, 2048, 8, "bf16")
    workspace = backward_workspace_bytes(shape, 2048, 8, "bf16")
    assert workspace == 8 * 12 * 2048**2 * 8 + 8 * 2048 * 8 * 768 * 2  # float32 score gradients, 16-bit MLP ones
    assert activation_bytes(shape, 2048, 8, "bf16", recompute=False) == 12 * full + workspace
    assert activation_bytes(shape, 2048, 8, "bf16", recompute=True) == 12 * 2 * 2048 * 8 * 768 + full + workspace


def test_gpipe_stages_hold_their_layers_for_every_micro_batch_of_a_pass():
    shape = PRESETS["gpt3-1.3b"]
    workspace = backward_workspace_bytes(shape, 2048, 1, "bf16")
    layer = layer_activation_bytes(shape, 2048, 1, "bf16")
    # GPipe runs all M micro-batches forward before any backward: a stage of 7 layers holds 7 x M of them.
    assert in_flight_micro_batches(4, accumulation_steps=8) == 8  # microbatches 0: the whole step in one pass
    assert in_flight_micro_batches(4, accumulation_steps=8, microbatches=2) == 2
    assert in_flight_micro_batches(1, accumulation_steps=8) == 1  # no pipeline: one micro-batch at a time
    assert activation_bytes(shape, 2048, 1, "bf16", False, layers=7, in_flight=8) == 7 * 8 * layer + workspace


def test_the_heaviest_stage_is_reported_with_its_own_activations_and_logits():
    args = {"vocab_size": 50_257, "sequence_length": 2048, "micro_batch": 1, "precision": "bf16"}
    args.update(optimizer="adamw", recompute=True, accumulation_steps=8, microbatches=0)
    shape = PRESETS["gpt3-1.3b"]
    one = device_memory(shape, model_parallel_degree=1, **args)
    four = device_memory(shape, model_parallel_degree=4, **args)
    # Blocks 4 | 7 | 7 | 6: the middle stages hold the most parameters, but the last one (6 blocks, 302 M) also
    # holds the logits (1.0 GB) and the head's embedding gradient (0.4 GB): it is the heaviest device.
    assert four.weights == (6 * 50_358_272 + 2 * 2048) * 6  # fp32 + bf16 copy
    assert four.logits == logits_bytes(50_257, 2048, 1, "bf16") + 50_257 * 2048 * 4
    assert one.model_state / four.model_state == pytest.approx(shape.parameters(50_257, 2048) / 302_153_728)
    assert four.total < one.total / 2


def test_logits_cost_ten_bytes_per_element_in_mixed_precision():
    assert logits_bytes(50_257, 2048, 8, "bf16") == 8 * 2048 * 50_257 * 10
    assert logits_bytes(50_257, 2048, 8, "fp32") == 8 * 2048 * 50_257 * 8


def _total_gib(preset: str, **kwargs) -> float:
    args = {
        "vocab_size": 50_257,
        "sequence_length": 2048,
        "micro_batch": 1,
        "precision": "fp16",
        "optimizer": "adamw",
        "recompute": True,
        "model_parallel_degree": 1,
        "accumulation_steps": 1,
        **kwargs,
    }
    return device_memory(PRESETS[preset], **args).total / GIB


def test_published_fits_of_mixed_precision_adam_without_sharding():
    """aws-facts: 16+ bytes per parameter; V100-16GB holds ~0.5-0.7 B, A100-40GB ~1.5 B, 80 GB parts ~3 B."""
    assert _total_gib("gpt3-1.3b") > 16  # not on a V100 even at micro-batch 1 with recomputation
    assert _total_gib("gpt3-350m") < 16
    assert _total_gib("gpt3-1.3b", micro_batch=4) < 40  # an A100-40GB with recomputation
    assert _total_gib("gpt3-1.3b", micro_batch=4, recompute=False) > 40  # ... but not without
    assert _total_gib("gpt3-2.7b", micro_batch=4) < 80
    assert _total_gib("gpt3-6.7b") > 80
