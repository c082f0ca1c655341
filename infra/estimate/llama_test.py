"""The estimate of a Llama shape: grouped-query attention's narrower K and V and SwiGLU's three matrices counted in
the parameters, FLOPs and activations, and Llama 3.2 1B on p4d and p5 (modelled)."""

from __future__ import annotations

import dataclasses

import pytest

from infra.estimate import compute, estimate
from infra.estimate.memory import layer_activation_bytes
from infra.training_code import model_presets, trained_presets

LLAMA = model_presets()["llama3.2-1b"]
D, LAYERS, FFN, KV_WIDTH, VOCAB, S = 2048, 16, 8192, 8 * 64, 128_256, 2048


def test_a_llama_preset_is_modelled_but_not_offered_to_the_plan():
    assert (LLAMA.architecture, LLAMA.n_kv_head, LLAMA.ffn_width, LLAMA.tie_embeddings) == ("llama", 8, FFN, True)
    assert "llama3.2-1b" not in trained_presets() and "gpt3-1.3b" in trained_presets()


def test_flops_count_the_grouped_kv_projections_and_the_three_swiglu_matrices():
    n = LLAMA.parameters(VOCAB, S)
    attention, mlp = 2 * D * D + 2 * D * KV_WIDTH, 3 * D * FFN  # q and o d x d, k and v d x 512; gate, up, down
    assert n == VOCAB * D + LAYERS * (attention + mlp + 2 * D) + D == 1_235_814_400  # Llama 3.2 1B's count
    assert compute.model_flops_per_token(LLAMA, n, S) == 6 * n + 12 * LAYERS * S * D
    scores = 4 * LAYERS * S * D
    assert compute.recompute_flops_per_token(LLAMA, S, "attention") == 2 * attention * LAYERS + scores
    assert compute.recompute_flops_per_token(LLAMA, S, "mlp") == 2 * mlp * LAYERS
    assert compute.recompute_flops_per_token(LLAMA, S, "full") == 2 * (attention + mlp + 2 * D) * LAYERS + scores
    as_gpt = dataclasses.replace(LLAMA, architecture="gpt")  # GPT's 4d² and 8d² at the same width: not these
    assert compute.recompute_flops_per_token(as_gpt, S, "attention") != compute.recompute_flops_per_token(
        LLAMA, S, "attention"
    )


def test_activations_count_the_swiglu_widths_and_the_rms_norms():
    b, sbd = 1, S * 1 * D
    attention = (8 + 6 * 2) * sbd + 2 * 32 * S * S * b  # two float32 RMSNorm tensors, 6 bf16 elements; P in bf16
    mlp = 8 * sbd + 2 * (sbd + 4 * S * b * FFN)
    assert layer_activation_bytes(LLAMA, S, b, "bf16") == attention + mlp
    assert layer_activation_bytes(LLAMA, S, b, "bf16", recompute="full") == 2 * sbd
    assert layer_activation_bytes(LLAMA, S, b, "bf16", recompute="attention") == mlp + 2 * sbd


def llama_estimate(instance_type: str, micro_batch: int, **overrides):
    arguments = dict(vocab_size=VOCAB, sequence_length=S, precision="bf16", recompute="full", instance_count=1)
    arguments.update(global_batch_tokens=1_048_576, train_tokens=10_000_000_000, preset="llama3.2-1b", **overrides)
    return estimate(LLAMA, micro_batch_size=micro_batch, instance_type=instance_type, **arguments)


@pytest.mark.parametrize(("instance_type", "micro_batch"), [("ml.p4d.24xlarge", 4), ("ml.p5.48xlarge", 8)])
def test_llama_3_2_1b_on_p4d_and_p5(instance_type, micro_batch):
    result = llama_estimate(instance_type, micro_batch)
    assert result.fits and result.parameters == 1_235_814_400
    assert result.model_flops_per_token == 6 * 1_235_814_400 + 12 * LAYERS * S * D
    with pytest.raises(ValueError, match=r"^model_parallel_degree 2: the llama decoder has no pipeline stages"):
        llama_estimate(instance_type, 1, model_parallel_degree=2)
