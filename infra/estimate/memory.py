"""Memory of one training device: model state, activations, logits and allocator slack, in bytes.

The model follows what this project's training code keeps (``training/gpt``, ``training/run``):

- Model state per parameter. Keras mixed precision keeps float32 variables and casts them to 16 bits
  for each step, so bf16/fp16 costs 4 (fp32 weights) + 2 (16-bit copy, kept for the backward pass)
  + 4 (fp32 gradients) + 8 (Adam m and v) = 18 bytes; float32 costs 4 + 4 + 8 = 16 bytes. Compiled (``xla``),
  the 16-bit copies are not counted: XLA converts a weight where it reads it, and of what it keeps at the peak
  (gpt3-1.3b: the QKV kernels' copies, 576 MiB) about as much again fits in the gradients' buffers, which XLA
  uses for temporaries until it writes the gradients (the blocks' saved inputs, 768 MiB, which the activations
  count); XLA's own figure for the micro-step, bench/compiled_memory_bench.py. Summing the
  gradients of several micro-batches holds the running sum and the next micro-batch's gradients at once:
  4 bytes more (data-parallel: ``trainer.py``'s accumulation; pipeline: ``gpipe.py``'s sum over a pass). The
  pipeline also keeps every gradient in a persistent float32 buffer between its two tf.functions
  (``pipeline_trainer.py``, ``self.buffers``): 4 bytes more per parameter of the stage.
- One micro-batch in flight without a pipeline: the accumulation loop runs its micro-batches one after the
  other (issue 37: by construction, not by TensorFlow's while-loop default of 10 parallel iterations).
- Activations per layer, per element of [s, b, h] (s = sequence, b = micro-batch, h = width, a = heads), as this
  code keeps them (the tensors alive at the peak, ``bench/recompute_memory_probe.py --profile``): each LayerNorm's
  float32 input, 4 bytes in every precision (``gpt/layers.py``'s LayerNorm computes in float32), and in the
  compute dtype 7 elements in the attention sublayer (the QKV matmul's input, q, k and v, the scaled q, the
  core's output O for its gradient, the projection's input) and 9 in the MLP (the fc matmul's input, the GELU's
  output and its slope, 4 each): 40 bytes in bf16, 72 in float32. Korthikanti et al. 2022 ("Reducing Activation
  Recomputation in Large Transformer Models", eq. 2) count 34 in 16 bits for Megatron's code: 2-byte LayerNorm
  inputs, one q, no O, and dropout masks, which this code does not keep at its default dropout 0 (a rate above
  0 adds them); with 34 the bench's bf16 case read 1.11 x the estimate. And per score element of [b, a, s, s]
  what the attention core keeps: ``naive`` (today's ``_attend``: the float32 softmax output its gradient needs and the
  bf16 probabilities the next matmul's does, 4 + 2 = 6 bytes; in float32 they are one tensor, 4) or ``lean``
  (a custom-gradient core that keeps only the probabilities: 2 bytes, 4 in float32).
- Recomputation (``recompute``): ``none`` keeps all of it; ``attention`` recomputes the attention sublayer
  from the block's input (keeps the MLP's and the input, no score-sized tensor); ``mlp`` recomputes the MLP from
  its input (keeps the attention sublayer's, the scores and the input); ``full`` (``True``) recomputes the whole
  block from its input (one [s, b, h] tensor in the compute dtype).
- The layer being differentiated (``differentiated_layer_bytes``): its recomputed part and its gradient buffers,
  in two phases, the larger counted. The MLP's backward pass comes first: its recomputed tensors (with full
  recomputation the attention sublayer's too, recomputed with them) and its two 4h-wide gradients, 2 x 4·s·b·h
  elements. Then the attention sublayer's, the MLP's tensors freed: its recomputed tensors and scores, and the
  gradients of the scores and probabilities (naive: 2 float32 score-sized tensors, 8 bytes per score element;
  lean: the bf16 dP and dS, 4 bytes, once XLA fuses the core's float32 arithmetic; uncompiled, TensorFlow runs
  it op by op, holding the bf16 dP and the float32 casts of P and dP at once, 10 bytes). Without the buffers
  the estimate fell short of measured CPU peaks by 7-19% (bench/estimate_vs_measured_bench.py; the uncompiled
  lean core's 10 bytes: its bf16 case at 1.14, 1.08 after); with both phases at once it read deep recomputed
  cases 30% high once the blocks' bias gradients no longer kept their inputs (issue 37).
- Logits: b·s·V elements, two float32 tensors at a time, 8 bytes: the (float32) logits and the softmax while
  the loss is taken, then the softmax and its gradient (``gpt/loss.py``: the gradient waits for the loss, so the
  logits are freed first); in bf16/fp16 the 16-bit logits die at their float32 cast, and the gradient's 16-bit
  cast (2) comes after the softmax is freed (4 + 2 < 8). Until issue 37's ordering fixes the 16-bit count was
  16: the logits, their cast, the softmax, the gradient and its cast, all alive at once. Compiled by XLA
  (``xla``), 8 bytes too: at its peak, the loss, XLA holds two float32 logits-sized tensors (gpt3-1.3b at b = 4:
  the float32 logits and the softmax, 2 x 1,571 MiB; the buffer assignment of the compiled micro-step,
  bench/compiled_memory_bench.py).
  The tied embedding's gradient from the head, [d, V] and its transpose, 8·V·d bytes, comes after the softmax
  is freed, beside the logits' gradient only: the peak holds the larger of the softmax and it. Run op by op in
  bf16/fp16, the gradient is allocated where the 16-bit logits and their float32 cast were, one free chunk of
  6 bytes an element, and TensorFlow's BFC allocator splits a chunk only at twice the request or 128 MiB to
  spare: below that the gradient holds all 6 (the bench's bf16 case, 128 MiB of gradient in a 192 MiB chunk).
  (Float32 was 12, fitted to the resident set while the executor ran the loss's cond and the head's embedding
  gradient last, keeping the logits, the softmax and their gradient through every block's backward pass, and
  while glibc's heap arenas kept freed tensors: issue 37.)
- Not at once: the logits and the backward working set of a layer (its recomputed part, its gradient buffers).
  The loss's backward pass frees the logits before the first block's begins, so the peak holds the larger of
  the two, not both (``Memory.not_at_once``). Summing them put the recomputed case 30% above the tensors it
  held (562 MiB of tensors, estimate 729, bench/recompute_memory_probe.py).
- Pipeline (model-parallel degree K): the blocks are split as training splits them (``stages.py``: balanced
  by parameters, embeddings on the first stage, final LayerNorm on the last). GPipe runs all M micro-batches
  of a pass forward before any backward (M from ``training/contract/batch.py``), and re-materialises as
  GPipe's paper does (``gpt/pipeline/gpipe.py``): a stage k > 0 keeps only its input of each micro-batch, M + 1
  slots of [b, s, d] in the compute dtype (one spare for the idle ticks), and its backward cell runs the
  stage's forward again under a tape, so it holds one micro-batch's activations of its layers at a time. The
  last stage runs its forward only inside its backward cell: the logits of one micro-batch at a time, and the
  head's gradient of the tied token embedding. Each device's memory is computed; the heaviest is reported.
  (Until this was read from the code the estimate counted M micro-batches' activations per stage and the
  last stage's M float32 softmaxes: 1,490 MiB against 718 measured, bench/estimate_vs_measured_bench.py.)
- Allocator slack: 5% of the tensors (BFC fragmentation). The CUDA context and TensorFlow's reserve are not
  tensors: they come off the device's memory instead (``hardware.py``: usable = total - context - reserve).
"""

from __future__ import annotations

import dataclasses

from infra.estimate import stages
from infra.training_code import ModelShape, training_module

GIB = 2**30
FRAGMENTATION = 0.05
OPTIMIZER_BYTES_PER_PARAMETER = {"adamw": 8, "adam": 8, "sgd": 4}  # Adam: fp32 m and v; SGD: fp32 momentum
MIXED_PRECISIONS = ("bf16", "fp16")
ATTENTION_KINDS = ("lean", "naive")
# The modes and the reading of a mode (true = full, false = none): the training contract's, the hyperparameter's.
RECOMPUTE_MODES, recompute_mode = training_module("hparams").RECOMPUTE_MODES, training_module("hparams").recompute_mode
# What a layer keeps per element of [s, b, h] (module docstring): each LayerNorm's float32 input, and elements of the
# compute dtype in the attention sublayer and in the MLP.
LAYER_NORM_INPUT_BYTES = 4
ATTENTION_ELEMENTS, MLP_ELEMENTS = 7, 9
# A Llama block's, read from gpt/llama_layers.py (not measured): each RMSNorm (autodiff) keeps its float32 input and
# normalised x for gamma's gradient, 8 bytes; the attention sublayer 6 d-wide elements (the QKV matmul's input, the
# core's q, k and v, k and v repeated to the query heads, its output O and the projection's input: the rotation and
# the repeat keep nothing); the MLP its input (d) and 4 of f: SiLU's input (gate), its output, up, and down's input.
RMS_NORM_BYTES, LLAMA_ATTENTION_ELEMENTS, LLAMA_MLP_WIDE_ELEMENTS = 8, 6, 4
# Bytes per score element: kept by the forward pass, and the backward working set (float32 gradients / bf16).
SCORES_KEPT = {"naive": 6, "lean": 2}  # 16-bit runs; float32 ones keep one float32 tensor, 4 bytes, either way
SCORES_WORKSPACE = {"naive": 8, "lean": 4}  # lean: compiled; uncompiled in 16 bits, LEAN_OP_BY_OP_WORKSPACE
BFC_SPLIT_BYTES = 128 * 2**20  # TensorFlow's BFC allocator splits a larger free chunk only with this much to spare
LEAN_OP_BY_OP_WORKSPACE = 10  # bf16 dP 2 + float32 P 4 + float32 dP 4 (``gpt/layers.py``'s causal_attention grad)


def allocator_slack(tensors: int) -> int:
    """``FRAGMENTATION`` of the tensors for the allocator: 30 GiB of tensors -> 1.5 GiB."""
    return round(FRAGMENTATION * tensors)


@dataclasses.dataclass(frozen=True)
class Memory:
    """Bytes one device needs at the peak of a training step, by kind."""

    weights: int
    gradients: int
    optimizer: int
    accumulation: int
    gradient_buffers: int
    activations: int
    logits: int
    # Of the activations, the layer being differentiated: its recomputed part and its backward working set. They
    # exist only after the loss's backward pass has freed the logits (gpt/loss.py: the loss's gradient waits for
    # the loss), so the two are never alive at once: the smaller of them is not counted (``not_at_once``).
    backward: int = 0

    @property
    def model_state(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.accumulation + self.gradient_buffers

    @property
    def transient(self) -> int:
        """The logits or one layer's backward working set, the larger: what the peak holds only for a moment."""
        return max(self.logits, self.backward)

    @property
    def not_at_once(self) -> int:
        """The logits or one layer's backward working set, whichever is smaller: the peak holds only the larger.

        gpt3-1.3b, b = 4, bf16, XLA, full recompute: logits 4 x 2048 x 50,257 x 8 = 3.29 GB, a layer's recomputed
        part and working set 2.55 GB -> 2.55 GB not at once.
        """
        return min(self.logits, self.backward)

    @property
    def modeled(self) -> int:
        """Every tensor alive at the peak, without the allocator's slack: the model state, what every layer keeps,
        and the larger of the logits and one layer's backward working set."""
        return self.model_state + self.activations + self.logits - self.not_at_once

    @property
    def micro_step(self) -> int:
        """What one micro-step holds: ``modeled`` less the optimizer's state, the running sum and the pipeline's
        buffers, which live outside it. Compiled, it is XLA's figure for the micro-step's program (its float32
        weights, gradients and temporaries: bench/compiled_memory_bench.py)."""
        return self.modeled - self.optimizer - self.accumulation - self.gradient_buffers

    @property
    def overhead(self) -> int:
        """5% of the tensors for allocator fragmentation (``allocator_slack``)."""
        return allocator_slack(self.modeled)

    @property
    def total(self) -> int:
        return self.modeled + self.overhead


def stage_parameters(shape: ModelShape, vocab_size: int, sequence_length: int, model_parallel_degree: int) -> int:
    """Parameters on the heaviest pipeline stage, split as training splits them (``stages.py``).

    gpt3-1.3b, K = 4: blocks 4 | 7 | 7 | 6 -> max(308.6, 352.5, 352.5, 302.2 M) = 7 x 50.4 M = 352.5 M.
    """
    return max(stages.stage_parameters(shape, vocab_size, sequence_length, model_parallel_degree))


def saved_input_bytes(
    shape: ModelShape, sequence_length: int, micro_batch: int, precision: str, pipeline_microbatches: int
) -> int:
    """A pipeline stage's saved inputs: M + 1 slots of [b, s, d] in the compute dtype (module docstring).

    gpt3-1.3b, s = 2048, b = 1, bf16, M = 8: 9 x 2048 x 2048 x 2 = 75.5 MB.
    """
    return (pipeline_microbatches + 1) * sequence_length * micro_batch * shape.d_model * 2 * _scale(precision)


def state_bytes_per_parameter(
    precision: str, optimizer: str, accumulate: bool, pipeline: bool = False, xla: bool = False
) -> dict[str, int]:
    """Bytes per parameter of weights, gradients, optimizer state, the running sum and the pipeline's buffers.

    bf16 + AdamW + accumulation: 6 + 4 + 8 + 4 = 22 (compiled, ``xla``: 20, no 16-bit copies); float32 + AdamW,
    no accumulation: 4 + 4 + 8 = 16; a pipeline stage adds its persistent float32 gradient buffers: 4 more.
    """
    return {
        "weights": 4 + (2 if precision in MIXED_PRECISIONS and not xla else 0),
        "gradients": 4,
        "optimizer": OPTIMIZER_BYTES_PER_PARAMETER[optimizer],
        "accumulation": 4 if accumulate else 0,
        "gradient_buffers": 4 if pipeline else 0,
    }


def _scale(precision: str) -> int:
    return 2 if precision == "fp32" else 1


def _layer_parts(
    shape: ModelShape, sequence_length: int, micro_batch: int, precision: str, attention: str
) -> tuple[int, int, int, int]:
    """A layer's tensors by sublayer (module docstring): the attention sublayer's [s, b, h]-sized ones, its scores,
    the MLP's, and the block's input, in bytes."""
    s, b, h, a = sequence_length, micro_batch, shape.d_model, shape.n_head
    sbh, element = s * b * h, 2 * _scale(precision)
    scores = (4 if precision == "fp32" else SCORES_KEPT[attention]) * a * s * s * b  # a: the query heads
    if shape.architecture == "llama":
        attention_part = (RMS_NORM_BYTES + LLAMA_ATTENTION_ELEMENTS * element) * sbh
        wide = LLAMA_MLP_WIDE_ELEMENTS * s * b * _ffn_width(shape)
        return attention_part, scores, RMS_NORM_BYTES * sbh + element * (sbh + wide), element * sbh
    attention_part = (LAYER_NORM_INPUT_BYTES + ATTENTION_ELEMENTS * element) * sbh
    mlp_part = (LAYER_NORM_INPUT_BYTES + MLP_ELEMENTS * element) * sbh
    return attention_part, scores, mlp_part, element * sbh


def _ffn_width(shape: ModelShape) -> int:
    return shape.ffn_width or 4 * shape.d_model


def mlp_gradient_elements(shape: ModelShape, sequence_length: int, micro_batch: int) -> int:
    """The MLP's gradient buffers while it is differentiated: GPT's two 4h-wide ones; a Llama's four f-wide ones
    (of down's input, of SiLU's output, and gate | up's, 2f), read from the code."""
    return (
        sequence_length * micro_batch * (4 * _ffn_width(shape) if shape.architecture == "llama" else 8 * shape.d_model)
    )


def layer_activation_bytes(
    shape: ModelShape,
    sequence_length: int,
    micro_batch: int,
    precision: str,
    attention: str = "lean",
    recompute: bool | str = "none",
) -> int:
    """What one decoder layer keeps for its backward pass (module docstring).

    gpt3-125m, s = 2048, b = 8, bf16, no recomputation, naive: (4 + 7 x 2 + 4 + 9 x 2) x 12.6 M + 6 x 12 x 2048² x
    8 = 503 M + 2,416 M = 2.92 GB; lean: 503 M + 805 M = 1.31 GB; full recomputation: the layer's input, 2 x 12.6
    M = 25 MB.
    """
    attention_part, scores, mlp_part, block_input = _layer_parts(
        shape, sequence_length, micro_batch, precision, attention
    )
    return {
        "none": attention_part + scores + mlp_part,
        "attention": mlp_part + block_input,
        "mlp": attention_part + scores + block_input,
        "full": block_input,
    }[recompute_mode(recompute)]


def score_gradient_bytes(
    shape: ModelShape, sequence_length: int, micro_batch: int, precision: str, attention: str = "lean", xla: bool = True
) -> int:
    """The attention core's gradient buffers: naive, float32 dP and dS (8 bytes a score element); lean, the bf16
    dP and dS (4) compiled, float32 ones in a float32 run (8), and op by op in 16 bits the float32 casts too (10).

    gpt3-125m, s = 2048, b = 8, bf16, naive: 8 x 12 x 2048² x 8 = 3.2 GB; lean: 1.6 GB (uncompiled: 4.0 GB).
    """
    s, b, a = sequence_length, micro_batch, shape.n_head
    per_score = SCORES_WORKSPACE[attention]
    if attention == "lean":
        per_score = 2 * per_score if precision == "fp32" else per_score if xla else LEAN_OP_BY_OP_WORKSPACE
    return per_score * a * s * s * b


def differentiated_layer_bytes(
    shape: ModelShape,
    sequence_length: int,
    micro_batch: int,
    precision: str,
    attention: str = "lean",
    recompute: bool | str = "none",
    xla: bool = True,
) -> int:
    """The layer being differentiated: what it recomputes and its gradient buffers, at the larger of its two phases.
    Its MLP's backward pass comes first and frees the MLP's tensors before the attention sublayer's begins:

        MLP phase       = recomputed MLP + (full recomputation: the attention sublayer and scores, recomputed
                          with it) + the MLP's two 4h-wide gradients, 8·s·b·h elements
        attention phase = recomputed attention sublayer and scores + the score gradients

    Counting both phases at once put the recomputed fp32 case of ``bench/recompute_memory_probe.py --layers 4
    --vocab 1024`` at 284 MiB against 199-202 measured (0.70); by phase, 216.
    gpt3-1.3b, s = 2048, b = 4, bf16, XLA, full: MLP phase 0.37 + 0.84 + 0.27 GB, attention phase 0.84 + 1.07 GB
    -> 1.91 GB.
    """
    mode = recompute_mode(recompute)
    attention_part, scores, mlp_part, _ = _layer_parts(shape, sequence_length, micro_batch, precision, attention)
    recomputed_attention = attention_part + scores if mode in ("full", "attention") else 0
    recomputed_mlp = mlp_part if mode in ("full", "mlp") else 0
    mlp_gradients = mlp_gradient_elements(shape, sequence_length, micro_batch) * 2 * _scale(precision)
    mlp_phase = recomputed_mlp + (recomputed_attention if mode == "full" else 0) + mlp_gradients
    attention_phase = recomputed_attention + score_gradient_bytes(
        shape, sequence_length, micro_batch, precision, attention, xla
    )
    return max(mlp_phase, attention_phase)


def activation_bytes(
    shape: ModelShape,
    sequence_length: int,
    micro_batch: int,
    precision: str,
    recompute: bool | str,
    layers: int | None = None,
    attention: str = "lean",
    xla: bool = True,
) -> int:
    """Activations of ``layers`` blocks (default: all) for one micro-batch during the backward pass, with the layer
    being differentiated (``xla``: whether the step is compiled).

    gpt3-125m, s = 2048, b = 8, bf16, naive: 12 x 2.92 GB = 35.0 GB; recomputed in full: 12 x 25 MB + the layer
    being differentiated, 2.92 + 3.2 GB = 6.4 GB.
    """
    layers = shape.n_layer if layers is None else layers
    args = (shape, sequence_length, micro_batch, precision, attention)
    kept = layer_activation_bytes(*args, recompute)
    return layers * kept + differentiated_layer_bytes(*args, recompute, xla)


def logits_bytes(
    vocab_size: int, sequence_length: int, micro_batch: int, precision: str, d_model: int, xla: bool = False
) -> int:
    """The loss's largest moment: the logits' gradient (its chunk) beside the softmax or, after it, the head's
    embedding gradient, 8·V·d (module docstring; with XLA the 16-bit logits, the float32 softmax and the 16-bit
    gradient, 8 bytes an element too).

    b = 8, s = 2048, V = 50,257, d = 768, bf16: 823 M elements x (4 + 4) = 6.6 GB, more than gpt3-125m's weights and
    Adam state (the head's 0.3 GB is less than the softmax's 3.3). b = 8, s = 512, V = 8,192, bf16 op by op: 33.6 M
    elements, the gradient in a 6-byte chunk (the spare 64 MiB is under BFC's 128): 6 + 4 = 10 bytes, 320 MiB.
    """
    elements = micro_batch * sequence_length * vocab_size
    gradient = 4 * elements
    if precision in MIXED_PRECISIONS and not xla and 2 * elements < BFC_SPLIT_BYTES:
        gradient += 2 * elements
    return gradient + max(4 * elements, 8 * vocab_size * d_model)


def stage_memories(
    shape: ModelShape,
    *,
    vocab_size: int,
    sequence_length: int,
    micro_batch: int,
    precision: str,
    optimizer: str,
    recompute: bool | str,
    model_parallel_degree: int,
    accumulation_steps: int,
    pipeline_microbatches: int = 1,
    attention: str = "lean",
    xla: bool = True,
) -> list[Memory]:
    """The memory breakdown of each pipeline stage's device: its parameters, its layers' activations for the
    in-flight micro-batches, the logits on the last. One entry without a pipeline.

    ``pipeline_microbatches`` is M, the micro-batches of one GPipe pass (``training/contract/batch.py``);
    ``xla``, whether the step is compiled (no 16-bit weight copies; fewer logits-sized tensors at once; a pipeline
    is never compiled: ``step_time.Implementation.as_run``).
    """
    piped = model_parallel_degree > 1
    per_parameter = state_bytes_per_parameter(precision, optimizer, accumulation_steps > 1, piped, xla)
    layers = stages.stage_layers(shape, vocab_size, sequence_length, model_parallel_degree)
    parameters = stages.stage_parameters(shape, vocab_size, sequence_length, model_parallel_degree)
    logits = logits_bytes(vocab_size, sequence_length, micro_batch, precision, shape.d_model, xla)  # last stage
    saved = saved_input_bytes(shape, sequence_length, micro_batch, precision, pipeline_microbatches)
    args = (shape, sequence_length, micro_batch, precision, recompute)
    return [
        Memory(
            **{kind: parameters[k] * size for kind, size in per_parameter.items()},
            # stage 0's inputs are the token ids
            activations=activation_bytes(*args, layers[k], attention, xla) + (saved if k > 0 else 0),
            logits=logits if k == model_parallel_degree - 1 else 0,
            backward=activation_bytes(*args, 0, attention, xla),  # zero layers: the one being differentiated
        )
        for k in range(model_parallel_degree)
    ]


def device_memory(shape: ModelShape, **kwargs) -> Memory:
    """The heaviest device's memory: of ``stage_memories(shape, **kwargs)``, the one with the largest total."""
    return max(stage_memories(shape, **kwargs), key=lambda memory: memory.total)
