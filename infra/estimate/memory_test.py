"""The memory model: bytes per parameter, activations, logits and the published fits."""

from __future__ import annotations

import dataclasses

import pytest

from infra.estimate.hardware import usable_bytes
from infra.estimate.memory import (
    GIB,
    RECOMPUTE_MODES,
    activation_bytes,
    device_memory,
    differentiated_layer_bytes,
    layer_activation_bytes,
    logits_bytes,
    recompute_mode,
    saved_input_bytes,
    score_gradient_bytes,
    stage_memories,
    stage_parameters,
    state_bytes_per_parameter,
)
from infra.estimate.stages import stage_parameters as stage_parameter_counts
from infra.instances import INSTANCE_TYPES
from infra.training_code import model_presets

PRESETS = model_presets()


@pytest.mark.parametrize(
    ("precision", "optimizer", "accumulate", "pipeline", "total"),
    [
        ("bf16", "adamw", False, False, 18),
        ("fp16", "adam", True, False, 22),
        ("fp32", "adamw", False, False, 16),
        ("fp32", "sgd", False, False, 12),
        ("bf16", "adamw", True, True, 26),  # a pipeline stage: + its persistent float32 gradient buffers
    ],
)
def test_model_state_bytes_per_parameter(precision, optimizer, accumulate, pipeline, total):
    assert sum(state_bytes_per_parameter(precision, optimizer, accumulate, pipeline).values()) == total


def test_stage_parameters_match_the_closed_form_count_and_split_the_blocks():
    shape = PRESETS["gpt3-1.3b"]
    assert stage_parameters(shape, 50_257, 2048, 1) == shape.parameters(50_257, 2048)
    # 4 stages of 4 | 7 | 7 | 6 blocks (50.36 M each), the 107.1 M embeddings on the first: the middle ones are
    # the heaviest. Splitting by layer count alone (6 each, embeddings on top) would put 409 M on the first.
    assert stage_parameters(shape, 50_257, 2048, 4) == 7 * 50_358_272
    # 5 stages: 3 | 6 | 5 | 5 | 5 blocks -> 6 on the second (302 M) vs the first's 3 x 50.4 + 107.1 = 258 M.
    assert stage_parameters(shape, 50_257, 2048, 5) == 6 * 50_358_272


def test_layer_activations_are_the_tensors_this_code_keeps():
    shape, sbh, scores = PRESETS["gpt3-125m"], 2048 * 8 * 768, 12 * 2048**2 * 8
    # Per [s, b, h] element, the two LayerNorms' float32 inputs (4 + 4) and 7 + 9 elements of the compute dtype:
    # 40 bytes in bf16 (the bench's bf16 case, profiled: 56 MiB a layer = 40 x 1 M + 16 MiB of probabilities),
    # 72 in float32 (Korthikanti et al.'s 34, 68); + per score element the float32 softmax and the bf16
    # probabilities (6 bytes; in float32 one tensor, 4).
    assert layer_activation_bytes(shape, 2048, 8, "bf16", "naive") == 40 * sbh + 6 * scores
    assert layer_activation_bytes(shape, 2048, 8, "fp32", "naive") == 72 * sbh + 4 * scores
    assert layer_activation_bytes(shape, 2048, 8, "fp32", "lean") == 72 * sbh + 4 * scores
    assert layer_activation_bytes(shape, 2048, 4, "bf16") * 2 == layer_activation_bytes(shape, 2048, 8, "bf16")


def test_the_lean_attention_core_keeps_only_bf16_probabilities():
    shape, sbh, scores = PRESETS["gpt3-125m"], 2048 * 8 * 768, 12 * 2048**2 * 8
    assert layer_activation_bytes(shape, 2048, 8, "bf16", "lean") == 40 * sbh + 2 * scores  # 6 -> 2 per score
    assert score_gradient_bytes(shape, 2048, 8, "bf16", "naive") == 8 * scores  # float32 dS, dP
    assert score_gradient_bytes(shape, 2048, 8, "bf16", "lean") == 4 * scores  # bf16 dP, dS
    # Uncompiled, TensorFlow holds the bf16 dP and the float32 casts of P and dP at once.
    assert score_gradient_bytes(shape, 2048, 8, "bf16", "lean", xla=False) == 10 * scores
    assert score_gradient_bytes(shape, 2048, 8, "fp32", "lean", xla=False) == 8 * scores


def test_each_recompute_mode_keeps_what_it_does_not_recompute():
    shape, sbh, scores = PRESETS["gpt3-1.3b"], 2048 * 4 * 2048, 2 * 16 * 2048**2 * 4
    kept = {m: layer_activation_bytes(shape, 2048, 4, "bf16", "lean", m) for m in RECOMPUTE_MODES}
    # the attention sublayer 4 + 7 x 2 = 18 bytes an element, the MLP 4 + 9 x 2 = 22, the block's input 2
    assert kept == {"none": 40 * sbh + scores, "attention": 24 * sbh, "mlp": 20 * sbh + scores, "full": 2 * sbh}
    assert layer_activation_bytes(shape, 2048, 4, "bf16", "lean", True) == kept["full"]
    assert layer_activation_bytes(shape, 2048, 4, "bf16", "lean", False) == kept["none"]
    # The layer being differentiated has its recomputed part back, phase by phase: the MLP's backward first (the
    # recomputed MLP, with full recomputation the attention sublayer too, and 8·s·b·h bf16 gradients), then the
    # attention sublayer's (its recomputed tensors and scores, and the score gradients: 2 x the scores compiled).
    differentiated = {m: differentiated_layer_bytes(shape, 2048, 4, "bf16", "lean", m) for m in RECOMPUTE_MODES}
    mlp_gradients, score_gradients = 16 * sbh, 2 * scores
    assert differentiated == {
        "none": max(mlp_gradients, score_gradients),
        "attention": max(mlp_gradients, 18 * sbh + scores + score_gradients),
        "mlp": max(22 * sbh + mlp_gradients, score_gradients),
        "full": max(22 * sbh + 18 * sbh + scores + mlp_gradients, 18 * sbh + scores + score_gradients),
    }
    assert differentiated["full"] == 18 * sbh + 3 * scores  # gpt3-1.3b: the attention phase, 1.91 GB
    with pytest.raises(ValueError, match="recompute: 'blocks' is not valid; expected one of none, attention"):
        recompute_mode("blocks")


def test_recomputation_keeps_layer_inputs_and_one_full_layer():
    shape = PRESETS["gpt3-125m"]
    full = layer_activation_bytes(shape, 2048, 8, "bf16", "naive")
    gradients = score_gradient_bytes(shape, 2048, 8, "bf16", "naive")  # the attention phase is the larger
    assert activation_bytes(shape, 2048, 8, "bf16", False, attention="naive") == 12 * full + gradients
    recomputed = activation_bytes(shape, 2048, 8, "bf16", True, attention="naive")
    attention_and_scores = full - (4 + 9 * 2) * 2048 * 8 * 768  # the MLP's tensors freed by then
    assert recomputed == 12 * 2 * 2048 * 8 * 768 + attention_and_scores + gradients


def test_gpipe_stages_keep_each_micro_batchs_input_and_one_micro_batchs_activations():
    """gpt/pipeline/gpipe.py re-materialises: a stage keeps M + 1 inputs and runs its forward again under a tape."""
    shape = PRESETS["gpt3-1.3b"]
    args = {"vocab_size": 50_257, "sequence_length": 2048, "micro_batch": 1, "precision": "bf16"}
    args.update(optimizer="adamw", recompute=False, model_parallel_degree=4, accumulation_steps=8)
    eight, thirty_two = (stage_memories(shape, pipeline_microbatches=m, **args) for m in (8, 32))
    one_micro_batch = activation_bytes(shape, 2048, 1, "bf16", False, layers=7)  # stage 1: blocks 4 | 7 | 7 | 6
    assert saved_input_bytes(shape, 2048, 1, "bf16", 8) == 9 * 2048 * 2048 * 2
    assert eight[1].activations == one_micro_batch + saved_input_bytes(shape, 2048, 1, "bf16", 8)
    assert thirty_two[1].activations - eight[1].activations == 24 * 2048 * 2048 * 2  # inputs only
    assert eight[0].activations == activation_bytes(shape, 2048, 1, "bf16", False, layers=4)  # token ids in


def test_a_data_parallel_device_holds_one_micro_batch_whatever_the_accumulation():
    args = {"vocab_size": 50_257, "sequence_length": 2048, "micro_batch": 4, "precision": "bf16"}
    args.update(optimizer="adamw", recompute=True, model_parallel_degree=1)
    shape = PRESETS["gpt3-1.3b"]
    two, sixteen = (device_memory(shape, accumulation_steps=n, **args) for n in (2, 16))
    assert two.activations == sixteen.activations and two.logits == sixteen.logits
    assert two.accumulation == sixteen.accumulation == shape.parameters(50_257, 2048) * 4  # one running sum
    assert device_memory(shape, accumulation_steps=1, **args).accumulation == 0


def test_the_heaviest_stage_is_reported_with_its_own_activations_and_logits():
    args = {"vocab_size": 50_257, "sequence_length": 2048, "micro_batch": 1, "precision": "bf16"}
    args.update(optimizer="adamw", recompute=True, accumulation_steps=8, pipeline_microbatches=8, xla=False)  # piped
    shape = PRESETS["gpt3-1.3b"]
    one = device_memory(shape, model_parallel_degree=1, **args)
    four = device_memory(shape, model_parallel_degree=4, **args)
    # Blocks 4 | 7 | 7 | 6: the last stage (6 blocks, 302 M) also holds the logits (1.2 GB) and the head's
    # embedding gradient (0.4 GB), but not beside its layers' backward working set (0.6 GB): a middle stage (7
    # blocks, 352.5 M) is the heaviest device, 9.69 GiB to the last's 9.42.
    last = stage_memories(shape, model_parallel_degree=4, **args)[-1]
    assert four.weights == 7 * 50_358_272 * 6 and four.logits == 0  # fp32 + bf16 copy
    assert last.weights == (6 * 50_358_272 + 2 * 2048) * 6 and last.total < four.total
    assert one.logits == logits_bytes(50_257, 2048, 1, "bf16", 2048, xla=True)
    # ... of one micro-batch at a time: its forward runs inside its backward cell.
    assert last.logits == one.logits and last.not_at_once == last.backward
    assert one.gradient_buffers == 0 and last.gradient_buffers == (6 * 50_358_272 + 2 * 2048) * 4
    assert four.total < one.total / 2


def test_the_pipeline_counts_its_persistent_float32_gradient_buffers():
    """Issue 41: gpt3-6.7b on 8 stages "fits 35.3 of 40" left out 4 bytes per parameter of the stage."""
    shape = PRESETS["gpt3-6.7b"]
    args = {"vocab_size": 50_257, "sequence_length": 2048, "micro_batch": 1, "precision": "bf16", "optimizer": "adamw"}
    args.update(recompute=True, model_parallel_degree=8, accumulation_steps=128, attention="naive", xla=False)
    stages = stage_memories(shape, pipeline_microbatches=128, **args)
    # Blocks 3 | 5 | 4 x 6: the second stage (5 blocks, 1,006.9 M parameters) holds the most parameters.
    second = stages[1]
    assert second.gradient_buffers == max(stage_parameter_counts(shape, 50_257, 2048, 8)) * 4 == 4_027_596_800
    assert round(dataclasses.replace(second, gradient_buffers=0).total / GIB, 1) == 25.8
    assert round(second.total / GIB, 1) == 29.8  # of the 37.6 GiB an A100-40GB gives TensorFlow
    assert device_memory(shape, pipeline_microbatches=128, **args) == second  # the heaviest


def test_logits_cost_8_bytes_per_element_in_every_precision():
    # bf16 uncompiled: 16 while the loss's cond and the head's embedding gradient ran last (issue 37).
    assert logits_bytes(50_257, 2048, 8, "bf16", 768) == 8 * 2048 * 50_257 * 8
    assert logits_bytes(50_257, 2048, 8, "bf16", 768, xla=True) == 8 * 2048 * 50_257 * 8
    # Two float32 tensors at a time: the logits and the softmax, then the softmax and its gradient (the logits
    # freed once the loss is taken, gpt/loss.py); 12 while the logits lived through the backward pass.
    assert logits_bytes(50_257, 2048, 8, "fp32", 768) == 8 * 2048 * 50_257 * 8
    # The head's embedding gradient and its transpose (8·V·d) come after the softmax is freed, beside the logits'
    # gradient: they count only when larger than the softmax (fewer tokens than twice the width).
    assert logits_bytes(50_257, 2048, 1, "fp32", 2048) == 4 * 2048 * 50_257 + 8 * 50_257 * 2048


def test_the_logits_gradient_takes_the_chunk_its_16_bit_logits_and_their_cast_leave():
    """bf16 op by op: the gradient (4 bytes an element) lands in the 6-byte hole of the 16-bit logits and their
    float32 cast, which TensorFlow's BFC allocator splits only with 128 MiB to spare (profiled: 128 MiB of
    gradient in a 192 MiB chunk, the bench's bf16 case)."""
    elements = 8 * 512 * 8192
    assert logits_bytes(8192, 512, 8, "bf16", 256) == (6 + 4) * elements  # 64 MiB to spare: kept whole
    assert logits_bytes(8192, 512, 8, "fp32", 256) == logits_bytes(8192, 512, 8, "bf16", 256, xla=True) == 8 * elements
    assert logits_bytes(50_257, 2048, 8, "bf16", 768) == 8 * 2048 * 50_257 * 8  # 1.6 GB to spare: split


def test_the_logits_and_a_layers_backward_working_set_are_not_counted_at_once():
    """The loss's backward pass frees the logits before any block's begins: the peak holds the larger of the two.
    Issue 37's recomputed bench case (small, V 8,192, s 512, b 8, fp32): the micro-step's tensors peak at the
    softmax, 365.5 MiB (bench/recompute_memory_probe.py --profile), the model's 354 without its slack."""
    shape = PRESETS["small"]
    args = {"vocab_size": 8192, "sequence_length": 512, "micro_batch": 8, "precision": "fp32", "optimizer": "adamw"}
    args.update(recompute=True, model_parallel_degree=1, accumulation_steps=1, xla=False)
    memory = device_memory(shape, **args)
    backward = differentiated_layer_bytes(shape, 512, 8, "fp32", "lean", True, xla=False)
    assert memory.backward == backward == activation_bytes(shape, 512, 8, "fp32", True, layers=0, xla=False)
    assert memory.logits == logits_bytes(8192, 512, 8, "fp32", 256) > backward  # the loss's backward is the peak
    assert memory.modeled == memory.model_state + memory.activations - backward + memory.logits
    assert round(memory.total / 2**20) == 372  # 729 MiB summed, with float32 logits at 12 bytes
    # Without a recomputed layer the working set is the gradient buffers only, and still not beside the logits.
    plain = device_memory(shape, **{**args, "recompute": False})
    assert plain.not_at_once == min(plain.logits, plain.backward) > 0


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
    """aws-facts: 16+ bytes per parameter; V100-16GB holds ~0.5-0.7 B, A100-40GB ~1.5 B, 80 GB parts ~3 B; against
    what TensorFlow can allocate on each (``hardware.py``), not the marketed sizes."""
    v100, a100, h100 = (
        usable_bytes(INSTANCE_TYPES[n]) / GIB for n in ("ml.p3.2xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge")
    )
    assert _total_gib("gpt3-1.3b") > v100  # not on a V100 even at micro-batch 1 with recomputation
    assert _total_gib("gpt3-350m") < v100
    assert _total_gib("gpt3-1.3b", micro_batch=4) < a100  # an A100-40GB with recomputation
    assert _total_gib("gpt3-1.3b", micro_batch=4, recompute=False) > a100  # ... but not without
    assert _total_gib("gpt3-2.7b", micro_batch=4) < h100
    assert _total_gib("gpt3-6.7b") > h100
