"""FLOPs of a training step and the time of its gradient all-reduce.

- Model FLOPs per token: 6·N for the weights (forward 2N, backward 4N) plus the attention scores,
  12·L·s·d (QKᵀ and AV, forward and backward; PaLM, appendix B), the same formula as
  ``training/contract/presets.flops_per_token``. MFU is always of these. A Llama shape's N is its own count
  (grouped-query attention's K and V projections g/h of multi-head's, SwiGLU's three d x f matrices, no biases);
  its scores are the query heads', h·e = d wide, the same 12·L·s·d. Llama 3.2 1B at s = 2,048: 6 x 1,235.8 M +
  12 x 16 x 2,048 x 2,048 = 7.41 + 0.81 = 8.22 GFLOP. Of an untied head's 2·V·d weights, the input embedding's
  V·d is a lookup, which 6·N counts as if it were a matmul (the convention the GPT rows' position embedding
  follows too).
- Executed FLOPs add what recomputation runs again, a forward pass of the recomputed part of every block:
  ``full`` 2·(12d² + 13d)·L + 4·L·s·d (the block's weights and its scores), ``attention`` 2·4d²·L + 4·L·s·d
  (QKV and the output projection, and the scores), ``mlp`` 2·8d²·L. gpt3-1.3b at s = 2,048: 9.10 GFLOP of
  model FLOPs per token; 11.92 executed with full recomputation, 9.70 with the attention's, 9.91 with the MLP's.
- A pipeline re-materialises every stage (``gpt/pipeline/gpipe.py``): its backward cell runs the stage's forward
  again, a full forward of every block on top of what ``recompute`` runs again inside it: gpt3-1.3b at
  s = 2,048 executes 11.92 GFLOP per token without recompute, 14.74 with it.
- Pipeline stages (K) each run 1/K of the layers; the GPipe schedule leaves each idle for
  (K - 1) / (m + K - 1) of a pass of m micro-batches (the bubble), so a pass takes (m + K - 1) / m times the
  ideal.
- The gradient all-reduce, hierarchical as NCCL runs it on these instances: a reduce-scatter and all-gather
  among the G GPUs of an instance over NVLink, 2·(G-1)/G x bytes at its bus bandwidth, and a ring among the I
  instances over EFA, 2·(I-1)/I x bytes at the instance's network bandwidth x ``NETWORK_EFFICIENCY`` (each of
  an instance's GPUs carries 1/G of the bytes over 1/G of its network). The two phases are added (NCCL
  pipelines them in chunks; the sum is the conservative side). float32 gradients are 4 bytes per parameter,
  bfloat16 2.
"""

from __future__ import annotations

from infra.estimate import hardware
from infra.estimate.memory import recompute_mode
from infra.instances import InstanceType
from infra.training_code import ModelShape, training_module

NETWORK_EFFICIENCY = 0.7  # fraction of the nominal bandwidth a ring all-reduce reaches over EFA or TCP (assumed)
GRADIENT_BYTES = {"fp32": 4, "bf16": 2}


def model_flops_per_token(shape: ModelShape, parameters: int, sequence_length: int) -> int:
    """6·N + 12·L·s·d. gpt3-125m at s = 2048: 6 x 125.2 M + 12 x 12 x 2048 x 768 = 751 M + 226 M = 978 MFLOP."""
    return 6 * parameters + 12 * shape.n_layer * sequence_length * shape.d_model


def recompute_flops_per_token(shape: ModelShape, sequence_length: int, recompute: bool | str) -> int:
    """The forward FLOPs recomputation runs again per token (module docstring): 0 without it. A Llama block's
    sublayers are its own matrices (``presets.sublayer_weights``: GQA's narrower K and V, SwiGLU's three)."""
    presets = training_module("presets")
    layers, scores = shape.n_layer, 4 * shape.n_layer * sequence_length * shape.d_model
    attention, mlp = presets.sublayer_weights(shape)
    return {
        "none": 0,
        "attention": 2 * attention * layers + scores,
        "mlp": 2 * mlp * layers,
        "full": 2 * presets.shape_block_parameters(shape) * layers + scores,
    }[recompute_mode(recompute)]


def hardware_flops_per_token(
    shape: ModelShape, parameters: int, sequence_length: int, recompute: bool | str, pipelined: bool = False
) -> int:
    """FLOPs executed per token: the model FLOPs plus the recomputed forward pass, and a pipeline's re-materialised
    forward (``pipelined``)."""
    extra = recompute_flops_per_token(shape, sequence_length, recompute)
    if pipelined:
        extra += recompute_flops_per_token(shape, sequence_length, "full")
    return model_flops_per_token(shape, parameters, sequence_length) + extra


def pipeline_factor(model_parallel_degree: int, micro_batches: int) -> float:
    """Step-time multiplier of a GPipe pipeline: (m + K - 1) / m. K = 4, m = 4 -> 1.75; K = 1 -> 1."""
    return (micro_batches + model_parallel_degree - 1) / micro_batches


def bubble_share(model_parallel_degree: int, micro_batches: int) -> float:
    """The idle share of each stage's device in a GPipe pass: ``training/contract/batch.py``'s ``bubble``."""
    return training_module("batch").bubble(model_parallel_degree, micro_batches)


def allreduce_seconds(
    stage_bytes: float, model_bytes: float, instance: InstanceType, instance_count: int, replicas_per_instance: int
) -> float:
    """Seconds to all-reduce one step's gradients between the data-parallel replicas (0 with one replica).

    Inside an instance each stage's ``stage_bytes`` among its ``replicas_per_instance`` GPUs; between instances
    one copy of every stage, ``model_bytes``, per instance (equal without a pipeline). 1.3 B in float32
    (5.26 GB) on 4 x p4d (8 A100s each, 230 GB/s NVLink bus, 400 Gbit/s EFA at 70%):
    2 x 7/8 x 5.26 / 230 + 2 x 3/4 x 5.26 / 35 = 0.040 + 0.226 = 0.266 s.
    """
    seconds, g = 0.0, replicas_per_instance
    if g > 1:
        seconds += 2 * (g - 1) / g * stage_bytes / (hardware.intra_instance_gbps(instance) * 1e9)
    if instance_count > 1:
        network = instance.network_gbps * 1e9 / 8 * NETWORK_EFFICIENCY
        seconds += 2 * (instance_count - 1) / instance_count * model_bytes / network
    return seconds
