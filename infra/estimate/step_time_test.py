"""The modelled step time: its parts, before and after issues 37, 41 and 48, and against llm-foundry's published MFU."""

from __future__ import annotations

import dataclasses

import pytest

from infra.estimate import compute, step_time
from infra.estimate.estimate import estimate
from infra.estimate.estimate_test import prod
from infra.estimate.step_time import AFTER, BEFORE, REFERENCE
from infra.training_code import model_presets

PRESETS = model_presets()


def test_score_sized_bytes_per_element_and_layer_are_the_counted_ones():
    """Issue 37: today's attention writes 36 bytes per score element and layer, 52 with recomputation; the lean
    core 8 and 12; a flash kernel none."""
    full = {name: sum(step_time.SCORE_BYTES[name]) + step_time.SCORE_BYTES[name][0] for name in ("naive", "lean")}
    assert {name: sum(step_time.SCORE_BYTES[name]) for name in ("naive", "lean")} == {"naive": 36, "lean": 8}
    assert full == {"naive": 52, "lean": 12}
    assert step_time.SCORE_BYTES["flash"] == (0, 0)


def test_prod_before_and_after_issue_37_on_p4d_and_p5():
    """The closing note's figures: modelled MFU of gpt3-1.3b, micro-batch 4, full recomputation, 4 instances. Since
    issue 48 the all-reduce follows the backward pass, as the code runs it (hidden, as the model had it: 38.4%, 30.3%).
    """
    mfu = {
        (kind, impl.name): round(prod(instance_type=kind, implementation=impl).modelled_mfu, 3)
        for kind in ("ml.p4d.24xlarge", "ml.p5.48xlarge")
        for impl in (BEFORE, AFTER)
    }
    assert mfu == {
        ("ml.p4d.24xlarge", "before"): 0.183,
        ("ml.p4d.24xlarge", "after"): 0.347,
        ("ml.p5.48xlarge", "before"): 0.138,
        ("ml.p5.48xlarge", "after"): 0.288,
    }
    before, after = prod(implementation=BEFORE), prod()
    # Today the score-sized and unfused passes take longer than the matmuls (issue 37: "about as long").
    assert before.step.memory > 2 * before.step.matmul
    assert after.step.memory < 0.6 * after.step.matmul  # 0.223 s against 0.391 s on the A100
    assert before.step.matmul == after.step.matmul  # the same FLOPs at the same rate


def test_the_all_reduce_follows_the_backward_pass_as_the_code_runs_it():
    """Issue 48: the trainer reduces the step's summed gradients, in float32, after the last micro-batch's compiled
    backward pass has returned all of them: nothing overlaps it."""
    before, after = prod(implementation=BEFORE), prod()
    assert before.step.allreduce_exposed == before.step.allreduce == pytest.approx(0.266, abs=0.001)
    assert after.step.allreduce_exposed == after.step.allreduce == before.step.allreduce
    assert after.step.total == pytest.approx(after.step.compute + after.step.allreduce)
    assert AFTER.allreduce_dtype == "fp32" and not AFTER.overlap
    bf16 = prod(implementation=dataclasses.replace(BEFORE, allreduce_dtype="bf16"))
    assert bf16.step.allreduce == pytest.approx(before.step.allreduce / 2)


def test_an_overlapped_all_reduce_hides_behind_the_backward_share_of_a_micro_batch_only():
    """With overlap (the reference's), what outlasts the last micro-batch's backward pass is exposed: the backward
    share of its time is its FLOPs less the forward's, recomputation included (micro-batch 1: 0.266 s against
    0.166 s of micro-batch, 74.5% of it backward, so 0.142 s exposed; against the whole micro-batch it would be 0.100).
    """
    overlapped = prod(implementation=dataclasses.replace(AFTER, overlap=True), micro_batch_size=1)
    st, shape = overlapped.step, PRESETS["gpt3-1.3b"]
    forward = compute.model_flops_per_token(shape, overlapped.parameters, 2048) / 3
    backward_share = 1 - forward / overlapped.hardware_flops_per_token  # 1 - 3.03 G / 11.92 G
    assert backward_share == pytest.approx(0.7455, abs=1e-4)
    assert 0 < st.allreduce_exposed < st.allreduce
    assert st.allreduce_exposed == pytest.approx(st.allreduce - backward_share * st.micro_batch, rel=1e-9)
    assert st.allreduce_exposed == pytest.approx(0.142, abs=0.001)
    assert prod(implementation=dataclasses.replace(AFTER, overlap=True)).step.allreduce_exposed < 0.05  # micro 4


def test_selective_recomputation_executes_less_than_full():
    seconds = {mode: prod(recompute=mode, instance_type="ml.p5.48xlarge").step_seconds for mode in ("none", "full")}
    attention = prod(recompute="attention", instance_type="ml.p5.48xlarge").step_seconds
    assert seconds["none"] < attention < seconds["full"]


def test_the_pipeline_pays_its_bubble_on_every_micro_batch():
    piped = prod(model_parallel_degree=2, microbatches=2)
    flat = prod(implementation=dataclasses.replace(AFTER, xla=False))  # a pipeline runs uncompiled (as_run)
    assert piped.step.compute == pytest.approx(
        piped.step.accumulation_steps * piped.step.micro_batch * 3 / 2 + piped.step.optimizer
    )
    assert piped.step.micro_batch < flat.step.micro_batch  # half the layers per stage
    assert prod().inputs.implementation.as_run(2).xla is False and prod().inputs.implementation.as_run(1).xla


# llm-foundry's scripts/train/benchmarking/README.md, 2,048-token rows on 8 GPUs (3b on H100: 16 GPUs, the only
# 2,048 row): MPT-1b/3b/7b are gpt3-1.3b/2.7b/6.7b's shapes; vocabulary 50,368; FSDP, flash attention.
FOUNDRY = [  # preset, instance type, micro-batch, global batch (sequences), activation checkpointing, MFU
    ("gpt3-1.3b", "ml.p4d.24xlarge", 8, 512, False, 0.5623),
    ("gpt3-2.7b", "ml.p4d.24xlarge", 5, 320, False, 0.5782),
    ("gpt3-6.7b", "ml.p4d.24xlarge", 12, 384, True, 0.5092),
    ("gpt3-1.3b", "ml.p4de.24xlarge", 14, 448, False, 0.5986),
    ("gpt3-2.7b", "ml.p4de.24xlarge", 10, 160, False, 0.6211),
    ("gpt3-6.7b", "ml.p4de.24xlarge", 6, 96, False, 0.6423),
    ("gpt3-1.3b", "ml.p5.48xlarge", 14, 112, False, 0.4182),
    ("gpt3-6.7b", "ml.p5.48xlarge", 6, 48, False, 0.4644),
]


@pytest.mark.parametrize(("preset", "kind", "micro", "sequences", "recompute", "published"), FOUNDRY)
def test_the_model_of_a_flash_attention_step_is_within_25_percent_above_llm_foundry(
    preset, kind, micro, sequences, recompute, published
):
    """The same model for llm-foundry's structure (flash attention, fused elementwise, overlapped reduction) comes
    out 3-11% above its A100 figures and 17-23% above its H100 ones: it leaves out that attention kernels run
    below GEMM efficiency, launch and FSDP gather overheads, and H100's clocks under load (step_time.py)."""
    p = estimate(
        PRESETS[preset],
        vocab_size=50_368,
        sequence_length=2048,
        micro_batch_size=micro,
        precision="bf16",
        recompute=recompute,
        instance_type=kind,
        instance_count=1,
        global_batch_tokens=sequences * 2048,
        train_tokens=10**9,
        implementation=REFERENCE,
    )
    assert published < p.modelled_mfu < 1.25 * published
