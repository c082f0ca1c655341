"""FLOPs, step time and network time of a training step.

- Model FLOPs per token: 6·N for the weights (forward 2N, backward 4N) plus the attention scores,
  12·L·s·d (QKᵀ and AV, forward and backward; PaLM, appendix B), the same formula as
  ``training/contract/presets.flops_per_token``.
- Recomputation runs the forward pass twice: 8·N + 16·L·s·d executed, 4/3 of the model FLOPs.
- ``mfu`` is the model-FLOPs utilisation the run would reach without recomputation; the hardware then
  runs at the same efficiency on the extra forward pass, so recomputation shows up as a longer step.
- Pipeline stages (K) each run 1/K of the layers; the GPipe schedule training runs leaves each idle for
  (K - 1) / (m + K - 1) of a pass of m micro-batches (the bubble), so a step takes (m + K - 1) / m times the
  ideal (m = micro-batches per pass).
- Gradients are all-reduced between instances once per step in float32 (4 bytes per parameter),
  ring all-reduce: each instance sends and receives 2·(I-1)/I of them, at ``NETWORK_EFFICIENCY`` of the
  instance's bandwidth, after the backward pass (not overlapped; TensorFlow's multi-worker strategy
  reduces after computing the gradients). Traffic inside an instance (NVLink) is taken as free.
"""

from __future__ import annotations

from infra.presets import ModelShape

NETWORK_EFFICIENCY = 0.7  # fraction of the nominal bandwidth a ring all-reduce reaches (NCCL over EFA or TCP)
GRADIENT_BYTES = 4  # gradients are float32 (Keras mixed precision keeps float32 variables)


def model_flops_per_token(shape: ModelShape, parameters: int, sequence_length: int) -> int:
    """6·N + 12·L·s·d. gpt3-125m at s = 2048: 6 x 125.2 M + 12 x 12 x 2048 x 768 = 751 M + 226 M = 978 MFLOP."""
    return 6 * parameters + 12 * shape.n_layer * sequence_length * shape.d_model


def hardware_flops_per_token(shape: ModelShape, parameters: int, sequence_length: int, recompute: bool) -> int:
    """FLOPs executed per token: the model FLOPs, plus one more forward pass (2·N + 4·L·s·d) when recomputing."""
    forward = 2 * parameters + 4 * shape.n_layer * sequence_length * shape.d_model
    return model_flops_per_token(shape, parameters, sequence_length) + (forward if recompute else 0)


def pipeline_factor(model_parallel_degree: int, micro_batches: int) -> float:
    """Step-time multiplier of a GPipe pipeline: (m + K - 1) / m. K = 4, m = 4 -> 1.75; K = 1 -> 1.

    The bubble, the idle fraction of each device, is (K - 1) / (m + K - 1): 3 / 7 = 43% for K = m = 4.
    """
    return (micro_batches + model_parallel_degree - 1) / micro_batches


def compute_seconds(
    tokens_per_replica: int, flops_per_token: int, model_parallel_degree: int, peak_flops: float, mfu: float
) -> float:
    """Seconds of compute for one optimizer step of one data-parallel replica (K devices share its layers).

    1.3 B on an A100 (312 TFLOPS) at 40%, 32,768 tokens x 9.1 GFLOP: 2.98e14 / 1.25e14 = 2.4 s.
    """
    return tokens_per_replica * flops_per_token / model_parallel_degree / (peak_flops * mfu)


def allreduce_seconds(parameters: int, instance_count: int, network_gbps: float) -> float:
    """Seconds to all-reduce one step's float32 gradients between instances (0 on one instance).

    1.3 B on 4 instances at 400 Gbit/s: 2 x 3/4 x 5.26 GB / (50 GB/s x 0.7) = 0.23 s.
    """
    if instance_count == 1:
        return 0.0
    sent = 2 * (instance_count - 1) / instance_count * parameters * GRADIENT_BYTES
    return sent / (network_gbps * 1e9 / 8 * NETWORK_EFFICIENCY)
