"""Memory of one training device: model state, activations, logits and framework overhead, in bytes.

The model follows what this project's Keras model does (``training/gpt``):

- Model state per parameter. Keras mixed precision keeps float32 variables and casts them to 16 bits
  for each step, so bf16/fp16 costs 4 (fp32 weights) + 2 (16-bit copy, kept for the backward pass)
  + 4 (fp32 gradients) + 8 (Adam m and v) = 18 bytes; float32 costs 4 + 4 + 8 = 16 bytes. Gradient
  accumulation over micro-batches adds a float32 accumulator: 4 bytes more.
- Activations per layer (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models", eq. 2): s·b·h·(34 + 5·a·s/h) bytes in 16-bit, where s = sequence, b = micro-batch, h = width,
  a = heads; the 5·a·s/h term is the s x s attention scores, softmax and dropout mask, which the model
  materialises (no fused attention). Float32 doubles it. With full recomputation a layer keeps only its
  input, 2·s·b·h bytes, and one layer at a time is rebuilt in full during the backward pass.
- The backward working set of the layer being differentiated, which the formula above (stored activations
  only) leaves out: the gradients of the attention scores and probabilities, 2·a·s²·b x 4 bytes (the model's
  softmax runs in float32), and of the MLP's two 4h-wide intermediates, 2 x 4·s·b·h x the element size.
  Without it the estimate fell short of measured CPU peaks by 7-19% (bench/estimate_vs_measured_bench.py).
- Logits: b·s·V elements, in the compute dtype (2 bytes), cast to float32 by the model (4) and the
  float32 softmax gradient of the loss (4): 10 bytes each in bf16/fp16, 8 in float32.
- Pipeline (model-parallel degree K): the blocks are split as training splits them (``stages.py``: balanced
  by parameters, embeddings on the first stage, final LayerNorm on the last). Training runs GPipe: a pass runs
  all M micro-batches forward before any backward, so every stage holds M micro-batches' activations of its
  layers (M = ``microbatches``, or every micro-batch of the step). The last stage computes the logits and the
  head's gradient of the tied token embedding (V·d x 4 bytes) before it goes to the first stage. Each
  device's memory is computed; the heaviest is reported.
- Framework overhead: 1 GiB (CUDA context, cuBLAS/cuDNN workspaces, TensorFlow runtime) plus 5% of
  everything else for allocator fragmentation.
"""

from __future__ import annotations

import dataclasses

from infra.estimate import stages
from infra.presets import ModelShape

GIB = 2**30
FRAMEWORK_OVERHEAD_BYTES = 1 * GIB
FRAGMENTATION = 0.05
OPTIMIZER_BYTES_PER_PARAMETER = {"adamw": 8, "adam": 8, "sgd": 4}  # Adam: fp32 m and v; SGD: fp32 momentum
MIXED_PRECISIONS = ("bf16", "fp16")


@dataclasses.dataclass(frozen=True)
class Memory:
    """Bytes one device needs at the peak of a training step, by kind."""

    weights: int
    gradients: int
    optimizer: int
    accumulation: int
    activations: int
    logits: int

    @property
    def model_state(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.accumulation

    @property
    def modeled(self) -> int:
        """Everything but the framework overhead."""
        return self.model_state + self.activations + self.logits

    @property
    def overhead(self) -> int:
        """1 GiB plus 5% of the rest: e.g. 30 GiB of tensors -> 1 + 1.5 = 2.5 GiB."""
        return FRAMEWORK_OVERHEAD_BYTES + round(FRAGMENTATION * self.modeled)

    @property
    def total(self) -> int:
        return self.modeled + self.overhead


def stage_parameters(shape: ModelShape, vocab_size: int, sequence_length: int, model_parallel_degree: int) -> int:
    """Parameters on the heaviest pipeline stage, split as training splits them (``stages.py``).

    gpt3-1.3b, K = 4: blocks 4 | 7 | 7 | 6 -> max(308.6, 352.5, 352.5, 302.2 M) = 7 x 50.4 M = 352.5 M.
    """
    return max(stages.stage_parameters(shape, vocab_size, sequence_length, model_parallel_degree))


def in_flight_micro_batches(model_parallel_degree: int, accumulation_steps: int, microbatches: int = 0) -> int:
    """Micro-batches whose activations a device holds at once: 1 without a pipeline (one micro-batch's forward
    and backward at a time); with one, GPipe's M = ``microbatches`` (0: every micro-batch of the step)."""
    if model_parallel_degree == 1:
        return 1
    return microbatches or accumulation_steps


def state_bytes_per_parameter(precision: str, optimizer: str, accumulate: bool) -> dict[str, int]:
    """Bytes per parameter of weights, gradients, optimizer state and the accumulator.

    bf16 + AdamW + accumulation: 6 + 4 + 8 + 4 = 22; float32 + AdamW, no accumulation: 4 + 4 + 8 = 16.
    """
    return {
        "weights": 4 + (2 if precision in MIXED_PRECISIONS else 0),
        "gradients": 4,
        "optimizer": OPTIMIZER_BYTES_PER_PARAMETER[optimizer],
        "accumulation": 4 if accumulate else 0,
    }


def layer_activation_bytes(shape: ModelShape, sequence_length: int, micro_batch: int, precision: str) -> int:
    """One decoder layer's saved activations without recomputation: s·b·h·34 + 5·a·s²·b (16-bit).

    gpt3-125m, s = 2048, b = 8: 2048 x 8 x 768 x 34 + 5 x 12 x 2048² x 8 = 428 M + 2,013 M = 2.44 GB.
    """
    s, b, h, a = sequence_length, micro_batch, shape.d_model, shape.n_head
    return (s * b * h * 34 + 5 * a * s * s * b) * (2 if precision == "fp32" else 1)


def backward_workspace_bytes(shape: ModelShape, sequence_length: int, micro_batch: int, precision: str) -> int:
    """Gradient buffers of one layer's backward pass: 8·a·s²·b + 8·s·b·h x element bytes.

    gpt3-125m, s = 2048, b = 8, bf16: 8 x 12 x 2048² x 8 + 8 x 12.6 M x 2 = 3,221 M + 201 M = 3.4 GB.
    """
    s, b, h, a = sequence_length, micro_batch, shape.d_model, shape.n_head
    return 8 * a * s * s * b + 8 * s * b * h * (4 if precision == "fp32" else 2)


def activation_bytes(
    shape: ModelShape,
    sequence_length: int,
    micro_batch: int,
    precision: str,
    recompute: bool,
    layers: int | None = None,
    in_flight: int = 1,
) -> int:
    """Activations of ``layers`` blocks (default: all) for ``in_flight`` micro-batches during the backward pass,
    with one layer's backward working set.

    Without recomputation: layers x in-flight micro-batches x the full per-layer figure. With it: each
    layer's input (2·s·b·h bytes, 4 in float32) plus one layer rebuilt in full.
    gpt3-125m, s = 2048, b = 8, bf16: 12 x 2.44 GB = 29.3 GB; recomputed: 12 x 25 MB + 2.44 GB = 2.7 GB;
    plus 3.4 GB of working set either way.
    """
    layers = shape.n_layer if layers is None else layers
    full = layer_activation_bytes(shape, sequence_length, micro_batch, precision)
    workspace = backward_workspace_bytes(shape, sequence_length, micro_batch, precision)
    if not recompute:
        return layers * in_flight * full + workspace
    layer_input = sequence_length * micro_batch * shape.d_model * (4 if precision == "fp32" else 2)
    return layers * in_flight * layer_input + full + workspace


def logits_bytes(vocab_size: int, sequence_length: int, micro_batch: int, precision: str) -> int:
    """Logits and their loss gradient: b·s·V x 10 bytes (8 in float32).

    b = 8, s = 2048, V = 50,257: 823 M elements x 10 = 8.2 GB, more than gpt3-125m's weights and Adam state.
    """
    return micro_batch * sequence_length * vocab_size * (10 if precision in MIXED_PRECISIONS else 8)


def device_memory(
    shape: ModelShape,
    *,
    vocab_size: int,
    sequence_length: int,
    micro_batch: int,
    precision: str,
    optimizer: str,
    recompute: bool,
    model_parallel_degree: int,
    accumulation_steps: int,
    microbatches: int = 0,
) -> Memory:
    """The memory breakdown of the heaviest device: of each pipeline stage's device (its parameters, its layers'
    activations for the in-flight micro-batches, the logits on the last), the one with the largest total."""
    per_parameter = state_bytes_per_parameter(precision, optimizer, accumulation_steps > 1)
    in_flight = in_flight_micro_batches(model_parallel_degree, accumulation_steps, microbatches)
    layers = stages.stage_layers(shape, vocab_size, sequence_length, model_parallel_degree)
    parameters = stages.stage_parameters(shape, vocab_size, sequence_length, model_parallel_degree)
    logits = logits_bytes(vocab_size, sequence_length, micro_batch, precision)
    if model_parallel_degree > 1:
        logits += vocab_size * shape.d_model * 4  # the head's embedding gradient, computed on the last stage
    devices = [
        Memory(
            **{kind: parameters[k] * size for kind, size in per_parameter.items()},
            activations=activation_bytes(
                shape, sequence_length, micro_batch, precision, recompute, layers[k], in_flight
            ),
            logits=logits if k == model_parallel_degree - 1 else 0,
        )
        for k in range(model_parallel_degree)
    ]
    return max(devices, key=lambda memory: memory.total)
