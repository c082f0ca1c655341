"""A modelled step time: the step's own counts at the device's rates. Every figure it gives is "modelled".

    micro-batch  = executed matmul FLOPs / (peak x GEMM efficiency)                    tensor cores
                 + 2 x bytes written by the other operations / (HBM bandwidth x 80%)   memory-bound passes
    step         = accumulation x micro-batch x (m + K - 1) / m   (the GPipe bubble, 1 without a pipeline)
                 + the optimizer's pass over the weights + the all-reduce that is not hidden

What runs as matmuls is counted exactly (``compute.py``); the rest is counted per layer as bytes written, and
each byte written is read once more (the factor 2). The bytes depend on the implementation (``Implementation``):

- Score-sized tensors ([B, heads, T, T]), bytes written per score element per layer, forward and backward:
  ``naive`` 16 + 20 (today's ``_attend``: float32 scores, the mask added, a float32 softmax, bf16
  probabilities, and as many again backward: 36 without recomputation, 52 with; issue 37's count of the TF
  graph); ``lean`` 4 + 4 once compiled (the custom-gradient core after XLA's fusion on a GPU: QKᵀ's bf16
  scores, which a GEMM writes, and the softmax fusion's bf16 probabilities forward; dP, a GEMM's output, and the
  fusion's dS backward; until issue 37's review the scores were left out, 2 + 4; ``gpt/layers_test.py`` counts 20
  on the CPU, whose XLA runs bf16 matmuls in float32), and the naive form's 16 + 20 uncompiled (the
  TF graph writes the same: 11 operations, 36 bytes); ``flash`` 0 (a fused kernel keeps them in on-chip
  memory). Recomputing the attention (``full`` or ``attention``) writes the forward's again.
- Activation-sized tensors ([B, T, d]), bytes written per token per layer in multiples of d: without XLA
  100 forward and 200 backward (float32 LayerNorms of ~8 passes each, casts, bias additions, transposes,
  residual additions, GELU's output and slope: each a separate pass); with XLA's fusion 30 and 60 (one pass
  per chain). Recomputed parts write their forward again (full: all of it; attention: 13/34; MLP: 21/34), and
  a pipeline stage writes its whole forward again (GPipe's re-materialisation, ``compute.py``).
  These are this module's reading of ``training/gpt/layers.py``, not a measurement.
- The loss: per token 14 x V bytes without XLA (float32 cast, softmax, gradient, its bf16 cast), 6 x V with.
- The weights: each forward casts them to 16 bits (2 bytes, again when recomputing or re-materialising) and
  each micro-batch adds its gradient to the running sum (4); the optimizer writes 40 bytes per parameter without
  XLA (AdamW as ~10 passes), 16 with.
- The all-reduce (``compute.allreduce_seconds``), of float32 gradients (``training/run/engines.py``: the dtype NCCL
  takes), in the code after the whole backward pass: the trainer sums the step's micro-batches before it reduces,
  and the compiled micro-step returns every gradient at its end, so no pack can leave earlier and nothing hides
  it (``AFTER``). Where the packs are sent as the last micro-batch's backward pass produces them (``overlap``, the
  reference's), all but what outlasts that backward pass is hidden: the part of the all-reduce longer than the
  backward share of a micro-batch (its FLOPs, recomputation included, less the forward's) is exposed.

Kernel-launch and host overheads are left out (with XLA there are few launches; without it TensorFlow's
executor runs ahead of the GPU while kernels are large).
"""

from __future__ import annotations

import dataclasses

from infra.estimate import compute, hardware
from infra.estimate.memory import recompute_mode
from infra.instances import InstanceType
from infra.training_code import ModelShape

SCORE_BYTES = {"naive": (16, 20), "lean": (4, 4), "flash": (0, 0)}  # per score element per layer: fwd, bwd
ELEMENTWISE_BYTES = {False: (100, 200), True: (30, 60)}  # per token per layer, x d: forward, backward (xla?)
LOSS_BYTES = {False: 14, True: 6}  # per token, x vocabulary
OPTIMIZER_BYTES = {False: 40, True: 16}  # per parameter per step
RECOMPUTED_SHARE = {"none": 0.0, "attention": 13 / 34, "mlp": 21 / 34, "full": 1.0}  # of the elementwise forward
READS_PER_WRITE = 1
# Extra forward FLOPs per token per layer a fused flash-attention backward runs again (QKᵀ and PV: 4·s·d;
# llm-foundry's benchmarking README: "the attention multiplier would be 5 instead of 4").
FLASH_RECOMPUTE_SCORES = 4


@dataclasses.dataclass(frozen=True)
class Implementation:
    """How the training step is written, as far as its time depends on it.

    Args:
        name: a label for tables (``before``, ``after``, ``reference``).
        attention: ``naive``, ``lean`` or ``flash`` (see the module docstring).
        xla: whether the micro-step is compiled with XLA (fused elementwise passes).
        xla_auto: XLA only where ``use_xla`` auto compiles (``as_run``).
        allreduce_dtype: ``fp32`` or ``bf16`` gradients on the wire.
        overlap: whether the all-reduce overlaps the last micro-batch's backward pass.
        parallel_checkpoint: whether every host writes its share of a save (``checkpoint.py``), or the chief alone.
    """

    name: str
    attention: str
    xla: bool
    allreduce_dtype: str = "fp32"
    overlap: bool = False
    parallel_checkpoint: bool = False
    xla_auto: bool = False

    def as_run(self, model_parallel_degree: int) -> Implementation:
        """The implementation as it runs this layout: with ``xla_auto``, compiled only where train.py's ``use_xla``
        auto compiles (``training/run/parallelism.py``: a data-parallel step; a pipeline runs uncompiled)."""
        if not self.xla_auto or model_parallel_degree == 1:
            return self
        return dataclasses.replace(self, xla=False)

    @property
    def memory_attention(self) -> str:
        """The attention kind of the memory model: the flash kernel keeps no more than the lean core."""
        return "naive" if self.attention == "naive" else "lean"


BEFORE = Implementation("before", attention="naive", xla=False)  # naive attention, no XLA, the chief checkpoints
AFTER = Implementation("after", "lean", xla=True, parallel_checkpoint=True, xla_auto=True)  # this code
REFERENCE = Implementation("reference", attention="flash", xla=True, overlap=True, parallel_checkpoint=True)
IMPLEMENTATIONS = {i.name: i for i in (BEFORE, AFTER, REFERENCE)}


@dataclasses.dataclass(frozen=True)
class StepTime:
    """Modelled seconds of one optimizer step on one device, by part."""

    matmul: float
    memory: float
    optimizer: float
    allreduce: float
    allreduce_exposed: float
    bubble_factor: float
    accumulation_steps: int

    @property
    def micro_batch(self) -> float:
        return self.matmul + self.memory

    @property
    def compute(self) -> float:
        """Every micro-batch of the step, with the bubble, and the optimizer."""
        return self.accumulation_steps * self.micro_batch * self.bubble_factor + self.optimizer

    @property
    def total(self) -> float:
        return self.compute + self.allreduce_exposed


def step_time(
    shape: ModelShape,
    *,
    parameters: int,
    stage_parameters: int,
    vocab_size: int,
    sequence_length: int,
    micro_batch: int,
    precision: str,
    recompute: bool | str,
    instance: InstanceType,
    instance_count: int,
    model_parallel_degree: int,
    accumulation_steps: int,
    pipeline_microbatches: int,
    implementation: Implementation,
) -> StepTime:
    """The modelled step time of one replica's device (module docstring)."""
    mode, impl = recompute_mode(recompute), implementation
    s, b, d, k = sequence_length, micro_batch, shape.d_model, model_parallel_degree
    layers = shape.n_layer / k
    tokens = b * s
    flops = compute.hardware_flops_per_token(shape, parameters, s, mode, pipelined=k > 1)
    if impl.attention == "flash":
        flops += FLASH_RECOMPUTE_SCORES * shape.n_layer * s * d
    peak = instance.peak_flops(precision)
    matmul = tokens * flops / k / (peak * hardware.matmul_efficiency(instance))

    forward, backward = SCORE_BYTES[impl.attention if impl.xla else "naive"]  # uncompiled, lean writes as naive
    if impl.attention == "lean" and precision == "fp32":
        forward, backward = 2 * forward, 2 * backward  # float32 probabilities and their gradients
    forwards = 1 + (k > 1)  # a pipeline stage runs its forward again in its backward cell (compute.py)
    attention_again = mode in ("full", "attention")
    scores = b * shape.n_head * s * s * layers * (forward * (forwards + attention_again) + backward)
    e_forward, e_backward = ELEMENTWISE_BYTES[impl.xla]
    elementwise = tokens * d * layers * (e_forward * (forwards + RECOMPUTED_SHARE[mode]) + e_backward)
    loss = tokens * vocab_size * LOSS_BYTES[impl.xla]  # the last stage's; the slowest stage sets the pace
    casts = 2 * (forwards + (mode != "none"))  # the 16-bit copy of the weights, made for each forward
    weights = stage_parameters * (casts + (4 if accumulation_steps > 1 else 0))
    bandwidth = hardware.memory_gbps(instance) * 1e9 * hardware.MEMORY_EFFICIENCY
    memory = (1 + READS_PER_WRITE) * (scores + elementwise + loss + weights) / bandwidth
    optimizer = (1 + READS_PER_WRITE) * stage_parameters * OPTIMIZER_BYTES[impl.xla] / bandwidth

    wire = compute.GRADIENT_BYTES[impl.allreduce_dtype]
    allreduce = compute.allreduce_seconds(
        stage_parameters * wire, parameters * wire, instance, instance_count, instance.devices // k
    )
    exposed = allreduce
    if impl.overlap:
        forward_flops = compute.model_flops_per_token(shape, parameters, s) / 3
        backward_share = 1 - forward_flops / flops  # the backward pass, recomputation included
        exposed = max(allreduce - backward_share * (matmul + memory), 0.0)
    factor = compute.pipeline_factor(k, pipeline_microbatches) if k > 1 else 1.0
    return StepTime(matmul, memory, optimizer, allreduce, exposed, factor, accumulation_steps)
