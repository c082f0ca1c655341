"""Estimates as readable text: one in detail, or every preset against every GPU instance type."""

from __future__ import annotations

import dataclasses
import math

from infra.estimate.checkpoint import LOST_SHARE_OF_HOUR, checkpoint_every_for, checkpoint_save
from infra.estimate.compute import bubble_share
from infra.estimate.estimate import Estimate, EstimateInputs, estimate_inputs
from infra.estimate.hardware import CUDA_CONTEXT_MIB, accelerator
from infra.estimate.layouts import cheapest_fitting, least_recompute, suggestions
from infra.estimate.memory import GIB, recompute_mode
from infra.estimate.runtime import START_UP_HOURS, finishes, margin, needed_hours
from infra.instances import GPU_TRAINING_TYPES, PRICES_AS_OF, PRICES_REGION, SPOT_DISCOUNT, InstanceType
from infra.training_code import ModelShape, model_presets, recipe_for


def _si(value: float) -> str:
    """1.3e9 -> '1.30 G', 4.2e12 -> '4.20 T'."""
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.2f} "


def _tokens(count: float) -> str:
    """300e9 -> '300 B tokens', 2.66e10 -> '26.6 B tokens', 1e6 -> '1 M tokens'."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if count >= scale:
            return f"{count / scale:,.3g} {unit} tokens"
    return f"{count:,.0f} tokens"


def _duration(days: float) -> str:
    return f"{days:,.1f} days" if days >= 1 else f"{days * 24:,.1f} hours"


def _layout(inputs: EstimateInputs) -> str:
    parts = [f"mb {inputs.micro_batch_size}"]
    if recompute_mode(inputs.recompute) != "none":
        parts.append(f"recompute {recompute_mode(inputs.recompute)}")
    if inputs.model_parallel_degree > 1:
        parts.append(f"pp {inputs.model_parallel_degree} x M {inputs.pipeline_microbatches}")
    return ", ".join(parts)


def _pipeline(inputs: EstimateInputs) -> str:
    """ ", GPipe passes of 4 micro-batches (bubble 43%)" for K = 4, M = 4: (K - 1) / (M + K - 1) = 3 / 7."""
    k, m = inputs.model_parallel_degree, inputs.pipeline_microbatches
    return f", GPipe passes of {m} micro-batches (bubble {bubble_share(k, m):.0%} of each stage's time)"


def _recipe(inputs: EstimateInputs) -> str:
    """The preset's recipe at this batch (GPT-3 Table 2.1 for gpt3-*) and how this run departs from it."""
    r = recipe_for(inputs.preset, inputs.global_batch_tokens, inputs.train_tokens)
    return (
        f"Recipe    peak lr {r.peak_lr:.1e}, warm-up {r.warmup_steps:,} steps, cosine to 10% at step "
        f"{r.decay_steps:,}; departs from {inputs.preset}'s recipe: {r.describe()}"
    )


def describe(p: Estimate, max_run_hours: int | None = None, spot: bool = False) -> str:
    """An estimate as a table of memory, compute, time and cost, with the changes that would make it fit; with
    ``max_run_hours``, the time the run needs against it (``runtime.py``). Times are modelled (``step_time.py``)."""
    i, m, inst, st = p.inputs, p.memory, p.inputs.instance, p.step
    s, d = i.shape, i.shape.d_model
    six_n, attention = 6 * p.parameters, p.model_flops_per_token - 6 * p.parameters
    copies = i.precision != "fp32" and not i.implementation.as_run(i.model_parallel_degree).xla  # memory.py
    mode = recompute_mode(i.recompute)
    rows = [
        ("weights" + (" (fp32 + 16-bit copy)" if copies else " (fp32)"), m.weights),
        ("gradients (fp32)", m.gradients),
        (f"optimizer state ({i.optimizer})", m.optimizer),
        (f"gradient running sum ({i.accumulation_steps} micro-batches)", m.accumulation),
        *([("pipeline gradient buffers (fp32)", m.gradient_buffers)] if m.gradient_buffers else []),
        (f"activations ({i.implementation.memory_attention} attention, recompute {mode})", m.activations),
        ("logits and loss gradient", m.logits),
        ("allocator fragmentation (5%)", m.overhead),
    ]
    verdict = "fits" if p.fits else "DOES NOT FIT"
    capacity = p.capacity_bytes / GIB
    lines = [
        f"Model     {_model_name(s)}: {s.n_layer} layers x {d} wide, {s.n_head} heads{_llama(s)} = "
        f"{p.parameters / 1e6:,.1f} M parameters (vocabulary {i.vocab_size:,}, {i.sequence_length:,}-token context)",
        f"Cluster   {i.instance_count} x {i.instance_type} = {inst.devices * i.instance_count} x "
        f"{inst.gpu_model or 'CPU host'} {inst.device_memory_gib} GiB, {i.precision}, {i.optimizer}, "
        f"recompute {mode}",
        f"Layout    data-parallel {i.data_parallel_degree} x pipeline {i.model_parallel_degree}, micro-batch "
        f"{i.micro_batch_size} x {i.accumulation_steps} per step, global batch {i.global_batch_tokens:,} tokens"
        + (_pipeline(i) if i.model_parallel_degree > 1 else ""),
        *([_recipe(i)] if i.preset else []),
        "",
        f"{'Memory per device':<52}{'GiB':>8}",
        *(f"  {name:<50}{size / GIB:>8.2f}" for name, size in rows),
        f"  {'total':<50}{m.total / GIB:>8.2f}  of {capacity:.1f} usable ({_usable(inst)}): {verdict}",
        f"  least recompute that fits: {least_recompute(i) or 'no mode fits'} (the fewest FLOPs of those that fit)",
        "",
        f"Compute (modelled: {i.implementation.name} implementation, step_time.py)",
        f"  FLOPs per token        {_si(p.model_flops_per_token)} (6N {_si(six_n)} + attention {_si(attention)})"
        + (f", {_si(p.hardware_flops_per_token)} executed with recompute {mode}" if mode != "none" else ""),
        f"  step time              {p.step_seconds:,.3f} s modelled = {i.accumulation_steps} x (matmuls "
        f"{st.matmul:,.3f} s + memory-bound {st.memory:,.3f} s)"
        + (f" x bubble {st.bubble_factor:.2f}" if st.bubble_factor > 1 else "")
        + f" + optimizer {st.optimizer:,.3f} s + all-reduce {st.allreduce_exposed:,.3f} s of {st.allreduce:,.3f} s "
        f"({i.implementation.allreduce_dtype}, "
        + ("overlapped with the last backward pass)" if i.implementation.overlap else "after the backward pass)"),
        f"  MFU                    {p.modelled_mfu:.1%} modelled; {p.tokens_per_second:,.0f} tokens/s modelled",
        f"  tokens per day         {_tokens(p.tokens_per_day)}",
        f"  time to {_tokens(i.train_tokens):<15}{_duration(p.train_days)}",
        *([_time_limit(p, spot, max_run_hours)] if max_run_hours else []),
        f"  cost                   ${p.cost_on_demand:,.0f} on demand at ${inst.price_per_hour:,.2f}/h per instance"
        + (" (estimated price)" if inst.price_is_estimate else "")
        + f"; ${p.cost_spot:,.0f} on spot (estimated {SPOT_DISCOUNT:.0%} discount); {PRICES_REGION} prices of "
        f"{PRICES_AS_OF}",
    ]
    lines += ["", *_checkpoints(p)]
    fixes = suggestions(p)
    if fixes:
        lines += ["", "Smallest changes that fit:", *(f"  {n}. {fix}" for n, fix in enumerate(fixes[:5], 1))]
    return "\n".join(lines)


def _checkpoints(p: Estimate) -> list[str]:
    """The save's size and time, chief alone and every host, the stop verdict and an interval (checkpoint.py)."""
    chief, every, used = checkpoint_save(p, False), checkpoint_save(p, True), checkpoint_save(p)
    hosts = p.inputs.instance_count
    stop = (
        "fits: a reclaim loses no steps"
        if used.stop_fits
        else "does not fit: a reclaim loses up to checkpoint_every steps"
    )
    every_n = checkpoint_every_for(p, used, LOST_SHARE_OF_HOUR)
    writer = "every host" if p.inputs.implementation.parallel_checkpoint else "the chief"
    return [
        "Checkpoints (modelled, checkpoint.py)",
        f"  size                   {used.size_bytes / GIB:,.2f} GiB (fp32 weights and AdamW moments)",
        f"  save                   {chief.seconds:,.1f} s by the chief alone; {every.seconds:,.1f} s with each of "
        f"{hosts} host(s) writing its share ({writer} writes in this implementation)",
        f"  stop (120 s)           step {p.step_seconds:,.1f} s + save {used.seconds:,.1f} s: {stop}",
        f"  checkpoint_every       {every_n:,} steps bound a reclaim's loss to {LOST_SHARE_OF_HOUR:.0%} of an hour",
    ]


def _usable(instance: InstanceType) -> str:
    """'40,536 MiB less 512 context and 1,536 TensorFlow reserve' (hardware.py), or 'host memory'."""
    gpu = accelerator(instance)
    if gpu is None:
        return "host memory"
    return (
        f"{gpu.total_mib:,} MiB less {CUDA_CONTEXT_MIB} CUDA context and {gpu.framework_reserve_mib:,} "
        "TensorFlow reserve"
    )


def _time_limit(p: Estimate, spot: bool, max_run_hours: int) -> str:
    """``  time limit             313 h needed (+15% checkpoints, spot restarts; 0.5 h start-up) of 336: finishes``."""
    need = needed_hours(p, spot)
    verdict = "finishes" if finishes(p, spot, max_run_hours) else "DOES NOT FINISH"
    return (
        f"  time limit             {math.ceil(need):,} h needed (+{margin(spot):.0%} checkpoints"
        f"{', spot restarts' if spot else ''}; {START_UP_HOURS} h start-up) of max_run_hours {max_run_hours}: {verdict}"
    )


def describe_all(template: EstimateInputs) -> str:
    """Every preset on every GPU training type: as given, and the cheapest layout that fits."""
    header = (
        f"{'preset':<11}{'instance':<19}{'as given':>10}  {'cheapest layout that fits':<26}{'GiB/device':>12}"
        f"{'days':>10}{'on demand':>13}{'spot':>11}"
    )
    lines = [
        f"{template.instance_count} instance(s) each, {template.sequence_length:,}-token context, "
        f"{template.precision}, micro-batch up to {template.micro_batch_size}, {_tokens(template.train_tokens)}, "
        f"modelled step times ({template.implementation.name}); prices {PRICES_REGION} {PRICES_AS_OF}, "
        "spot an estimate",
        header,
        "-" * len(header),
    ]
    for name, shape in model_presets().items():
        for instance_type in GPU_TRAINING_TYPES:
            inputs = dataclasses.replace(template, shape=shape, instance_type=instance_type, model_parallel_degree=1)
            lines.append(_row(name, inputs))
    return "\n".join(lines)


def _row(name: str, inputs: EstimateInputs) -> str:
    if inputs.precision == "bf16" and not inputs.instance.supports_bf16:
        inputs = dataclasses.replace(inputs, precision="fp16")  # V100: fp16 with loss scaling instead
    try:
        given = "fits" if estimate_inputs(inputs).fits else "no"
    except ValueError:
        given = "invalid"
    best = cheapest_fitting(inputs, inputs.instance_type)
    start = f"{name:<11}{inputs.instance_type:<19}{given:>10}  "
    if best is None:
        return start + "nothing fits"
    return start + (
        f"{_layout(best.inputs):<26}{best.memory.total / GIB:>6.1f} / {best.capacity_bytes / GIB:<5.1f}"
        f"{best.train_days:>10,.1f}{best.cost_on_demand:>13,.0f}{best.cost_spot:>11,.0f}"
    )


def _llama(shape: ModelShape) -> str:
    """What a Llama shape adds to the model line: its key/value heads, SwiGLU width and head tying."""
    if shape.architecture != "llama":
        return ""
    tied = "tied" if shape.tie_embeddings else "untied"
    kv, ffn = shape.n_kv_head or shape.n_head, shape.ffn_width or 4 * shape.d_model
    return f" (llama: {kv} key/value heads, SwiGLU {ffn:,} wide, {tied} head)"


def _model_name(shape: ModelShape) -> str:
    return next((name for name, s in model_presets().items() if s == shape), "custom shape")
