import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from gpt import layers
from gpt.layers import CausalSelfAttention, DecoderBlock, LayerNorm, gelu


def test_block_is_pre_norm_with_two_residuals():
    block = DecoderBlock(d_model=32, n_head=4, n_layer=2)
    x = tf.random.stateless_normal([2, 6, 32], seed=[1, 2])
    out = block(x).numpy()
    h = x + block.attn(block.ln_1(x))  # first residual around normalised attention
    expected = h + block.fc_proj(tf.nn.gelu(block.fc(block.ln_2(h)), approximate=True))  # second, around the MLP
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-5, atol=1e-5)


def test_attention_is_causal_and_first_position_attends_only_to_itself():
    attention = CausalSelfAttention(d_model=16, n_head=2)
    x = tf.random.stateless_normal([1, 5, 16], seed=[3, 4])
    out = attention(x).numpy()
    # Position 0 sees itself only: its output equals the output for a one-token sequence.
    np.testing.assert_allclose(out[:, :1], attention(x[:, :1]).numpy(), rtol=1e-5, atol=1e-6)
    x_changed = tf.concat([x[:, :3], x[:, 3:] + 1.0], axis=1)
    np.testing.assert_array_equal(out[:, :3], attention(x_changed).numpy()[:, :3])


def test_residual_projections_start_smaller_in_deeper_models():
    shallow, deep = DecoderBlock(64, 2, n_layer=1), DecoderBlock(64, 2, n_layer=16)
    shallow.build((1, 4, 64))
    deep.build((1, 4, 64))
    assert np.std(deep.fc_proj.kernel.numpy()) < np.std(shallow.fc_proj.kernel.numpy()) / 2


def gradients(layer_or_fn, x, weights=()):
    upstream = tf.random.stateless_normal(x.shape, seed=[5, 6])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer_or_fn(x)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
    return [y, *tape.gradient(loss, [x, *weights])]


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_layer_norm_equals_keras_values_and_gradients(dtype):
    x = tf.random.stateless_normal([4, 7, 32], seed=[1, 2]) * 3 + 1
    ours, keras_norm = LayerNorm(epsilon=1e-5, dtype=dtype), keras.layers.LayerNormalization(epsilon=1e-5, dtype=dtype)
    for norm in (ours, keras_norm):
        norm.build(x.shape)
        norm.gamma.assign(tf.random.stateless_normal([32], seed=[3, 4]))
        norm.beta.assign(tf.random.stateless_normal([32], seed=[5, 6]))
    tolerance = 1e-5 if dtype == "float32" else 2e-2
    for a, b in zip(
        gradients(lambda v: ours(v, training=True), x, [ours.gamma, ours.beta]),  # the written-out gradient
        gradients(keras_norm, x, [keras_norm.gamma, keras_norm.beta]),
        strict=True,
    ):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(tf.cast(a, tf.float32), tf.cast(b, tf.float32), rtol=tolerance, atol=tolerance)
    with pytest.raises(ValueError, match="last axis"):
        LayerNorm(axis=1)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_fused_gelu_equals_keras_values_and_gradients(dtype):
    x = tf.cast(tf.random.stateless_normal([64, 16], seed=[7, 8]) * 3, dtype)
    tolerance = 1e-5 if dtype == tf.float32 else 2e-2  # float32: XLA's tanh is 4e-6 off near 0
    for a, b in zip(
        gradients(gelu, x),
        gradients(lambda v: keras.activations.gelu(tf.cast(v, tf.float32), approximate=True), x),
        strict=True,
    ):
        np.testing.assert_allclose(tf.cast(a, tf.float32), tf.cast(b, tf.float32), rtol=tolerance, atol=tolerance)


def test_training_and_inference_blocks_agree():
    """Training runs the fused GELU, inference Keras' (the export needs no XLA): the same function."""
    block = DecoderBlock(d_model=32, n_head=4)
    x = tf.random.stateless_normal([2, 6, 32], seed=[1, 2])
    np.testing.assert_allclose(block(x, training=True), block(x, training=False), rtol=1e-5, atol=1e-6)


def autodiff_attention(q, k, v, rate=0.0, seed=None):
    """The attention core as it was before ``causal_attention``: autodiff through float32 scores, an added mask,
    a float32 softmax and its compute-dtype copy (the reference for its values, gradients and tensor counts)."""
    length = q.shape[2]
    future = tf.range(length)[tf.newaxis, :] > tf.range(length)[:, tf.newaxis]
    scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32) + tf.where(future, tf.float32.min, 0.0)
    probs = tf.cast(tf.nn.softmax(scores, axis=-1), q.dtype)
    return tf.matmul(layers._dropout(probs, rate, seed, site=1), v)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(("rate", "jit_compile"), [(0.0, False), (0.3, False), (0.0, True)])
def test_attention_core_equals_autodiff_attention_values_and_gradients(dtype, rate, jit_compile):
    shape = [2, 3, 11, 8]
    q, k, v = (tf.cast(tf.random.stateless_normal(shape, seed=[i, 7]), dtype) for i in range(3))
    upstream = tf.cast(tf.random.stateless_normal(shape, seed=[9, 9]), dtype)
    seed = tf.constant([4, 2]) if rate else None

    def values_and_gradients(attention):
        return tf.function(lambda: forward_and_backward(attention), jit_compile=jit_compile)()

    def forward_and_backward(attention):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = attention(q, k, v, rate, seed)
        return [out, *tape.gradient(out, [q, k, v], output_gradients=upstream)]

    tolerance = 1e-5 if dtype == "float32" else 3e-2  # bf16: 8 bits of mantissa, sums of 11 products
    for ours, reference in zip(
        values_and_gradients(layers.causal_attention), values_and_gradients(autodiff_attention), strict=True
    ):
        assert ours.dtype == reference.dtype
        ours, reference = tf.cast(ours, tf.float32).numpy(), tf.cast(reference, tf.float32).numpy()
        np.testing.assert_allclose(ours, reference, rtol=tolerance, atol=tolerance * np.abs(reference).max())


SCORE_SHAPE = [2, 3, 11, 11]  # B, H, T, T: T distinct from every other dimension (head 8, d 24, 4d 96)
ELEMENT_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "pred": 1, "s32": 4}


def block_step(recompute: bool):
    """A mixed-bf16 block's forward and backward pass in training, as a tf.function of its input."""
    block = DecoderBlock(d_model=24, n_head=3, recompute=recompute, dtype="mixed_bfloat16")
    x = tf.random.stateless_normal(SCORE_SHAPE[:1] + SCORE_SHAPE[2:3] + [24], seed=[1, 2])
    block.build(x.shape)

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.cast(block(x, training=True), tf.float32))
        return tape.gradient(loss, [x, *block.trainable_variables])

    return step, x


def graph_score_sized(recompute: bool) -> tuple[int, int]:
    """(operations with a score-sized output, bytes they write per score element) in the TensorFlow graph
    (aliases, Identity and IdentityN, not counted)."""
    step, x = block_step(recompute)
    graph = tf.function(step).get_concrete_function(x).graph
    outputs = [
        t for op in graph.get_operations() if op.type not in ("Identity", "IdentityN") for t in op.outputs
        if t.shape.as_list() == SCORE_SHAPE
    ]  # fmt: skip
    return len({t.op.name for t in outputs}), sum(t.dtype.size for t in outputs)


def xla_score_sized(recompute: bool) -> tuple[int, int]:
    """The same in XLA's optimized HLO on this CPU: instructions outside fused computations (a fusion is one
    pass, writing its outputs) whose result is score-sized."""
    step, x = block_step(recompute)
    text = tf.function(step, jit_compile=True).experimental_get_compiler_ir(x)(stage="optimized_hlo")
    computations, current = {}, None
    for line in (line.strip() for line in text.splitlines()):
        if line.endswith("{") and "=" not in line.split("(")[0] and not line.startswith("HloModule"):
            current = computations.setdefault(line.split("(")[0].replace("ENTRY", "").strip(" %"), [])
        elif line == "}":
            current = None
        elif current is not None and "=" in line:
            current.append(line.split("=", 1)[1].strip())
    fused = {name for lines in computations.values() for i in lines if " fusion(" in i for name in
             re.findall(r"calls=%?([\w.\-]+)", i)}  # fmt: skip
    score = re.compile(r"(\w+)\[" + ",".join(map(str, SCORE_SHAPE)) + r"\]")
    written = [
        score.findall(i[: i.index(")") + 1] if i.startswith("(") else i.split(" ")[0])
        for name, lines in computations.items() if name not in fused for i in lines
        if not re.search(r"\s(parameter|get-tuple-element|bitcast|tuple)\(", i)
    ]  # fmt: skip
    written = [hits for hits in written if hits]
    return len(written), sum(ELEMENT_BYTES[dtype] for hits in written for dtype in hits)


@pytest.mark.parametrize(
    ("count", "recompute", "before", "after"),
    # Measured here (B, H, T = 2, 3, 11; mixed bf16; no dropout): (operations, bytes written per score element)
    # of one block's forward and backward pass, with the test-local ``autodiff_attention`` (before) and with
    # ``causal_attention`` (after).
    [
        (graph_score_sized, False, (11, 36), (11, 36)),
        (graph_score_sized, True, (16, 52), (16, 52)),
        (xla_score_sized, False, (8, 28), (6, 20)),
        (xla_score_sized, True, (8, 28), (6, 20)),
    ],
)
def test_score_sized_tensors_of_a_block_before_and_after_the_attention_core(
    monkeypatch, count, recompute, before, after
):
    assert count(recompute) == after
    monkeypatch.setattr(layers, "causal_attention", autodiff_attention)
    assert count(recompute) == before


def waited_for(tensor: tf.Tensor) -> set:
    """The operations ``tensor`` waits for, by data and control edges, once grappler has bypassed the ``IdentityN``
    that tf.custom_gradient puts over a function's results (which alone would make each wait for all of them)."""
    found, stack = set(), [tensor]
    while stack:
        item = stack.pop()
        if isinstance(item, tf.Tensor):
            if item.op.type == "IdentityN":  # bypassed: its output k is its input k
                stack += [item.op.inputs[item.value_index], *item.op.control_inputs]
                continue
            item = item.op
        if item not in found:
            found.add(item)
            stack += [*item.inputs, *item.control_inputs]
    return found


def waiting_for(graph: tf.Graph, tensor: tf.Tensor) -> set:
    """The operations of ``graph`` that wait for ``tensor``, by data and control edges."""
    after = {tensor.op}
    for op in graph.get_operations():  # operations are listed in the order they were made, each after its inputs
        if any(t.op in after for t in op.inputs) or any(c in after for c in op.control_inputs):
            after.add(op)
    return after


def test_the_attention_cores_backward_waits_for_its_gradient():
    """Its float32 casts of P and O need only the forward pass's tensors; without an edge from the incoming
    gradient the executor may run them during the forward pass, a float32 copy of every layer's P alive at the
    loss (docs/benchmarks.md). No score-sized operation may be free of both the output and the gradient."""
    spec = tf.TensorSpec([1, 2, 8, 4], tf.bfloat16)  # T = 8: scores [1, 2, 8, 8]

    @tf.function
    def backward(q, k, v, d_out):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = layers.causal_attention(q, k, v)
        return out, tape.gradient(out, [q, k, v], output_gradients=d_out)

    graph = backward.get_concrete_function(spec, spec, spec, spec).graph
    ops = graph.get_operations()
    forward = waited_for(graph.outputs[0])  # what the output needs
    after = waiting_for(graph, graph.inputs[3])  # what waits for the incoming gradient
    score_sized = [op for op in ops if any(t.shape == [1, 2, 8, 8] for t in op.outputs)]
    assert [op for op in score_sized if op in after] and [op for op in score_sized if op in forward]
    assert [op.name for op in score_sized if op not in forward | after] == []


def recomputed_block_gradient_graph() -> tuple[tf.Graph, tf.Tensor]:
    """The uncompiled gradient graph of a block recomputed in full, and its input's gradient."""
    block = DecoderBlock(d_model=24, n_head=3, recompute="full")
    block.build([2, 11, 24])

    @tf.function
    def gradients(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(block(x, training=True))
        return tape.gradient(y, [x, *block.trainable_variables])

    concrete = gradients.get_concrete_function(tf.TensorSpec([2, 11, 24]))
    return concrete.graph, concrete.graph.outputs[0]


@pytest.mark.parametrize("recompute", ["full", "attention", "mlp"])
def test_a_recomputed_forward_pass_waits_for_the_incoming_gradient(recompute):
    """Uncompiled, nothing but a control edge from the incoming gradient keeps the recomputation in the backward
    pass: the second forward pass needs only the block's input and weights, and without the edge the executor may
    run it during the first, keeping what recomputation should free. Every matmul is the output's or waits for the
    gradient (under XLA the barrier does it: ``test_recomputation_survives_xla_and_gives_the_gradients_of_none``)."""
    block = DecoderBlock(d_model=24, n_head=3, recompute=recompute)
    block.build([2, 11, 24])
    spec = tf.TensorSpec([2, 11, 24])

    @tf.function
    def backward(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = block(x, training=True)
        return y, tape.gradient(y, [x, *block.trainable_variables], output_gradients=dy)

    graph = backward.get_concrete_function(spec, spec).graph
    forward, after = waited_for(graph.outputs[0]), waiting_for(graph, graph.inputs[1])
    matmuls = [op for op in graph.get_operations() if op.type in ("MatMul", "BatchMatMulV2")]
    recomputed = {"full": 6, "attention": 4, "mlp": 2}[recompute]  # qkv, q kᵀ, p v, projection; fc, its projection
    assert len(matmuls) == 6 + recomputed + 12 and len([op for op in matmuls if op in forward]) == 6
    assert [op.name for op in matmuls if op not in forward | after] == []


def test_a_recomputed_block_takes_the_layer_norms_own_gradient():
    """The recomputation runs outside Keras' call context; without ``training`` passed on, its LayerNorms took
    autodiff's gradient of their formula (RsqrtGrad and about ten more operations each)."""
    graph, _ = recomputed_block_gradient_graph()
    assert [op.name for op in graph.get_operations() if op.type == "RsqrtGrad"] == []


def test_a_recomputed_blocks_input_gradient_waits_for_its_weights_gradients():
    """A bias's gradient feeds nothing downstream; without an edge the executor took it after later blocks'
    backward passes, its [b·s, 4d] input alive until then (docs/benchmarks.md)."""
    graph, dx = recomputed_block_gradient_graph()
    before = waited_for(dx)  # grappler removes the IdentityN: without the edge the executor took the biases last
    bias_gradients = [op for op in graph.get_operations() if op.type == "BiasAddGrad"]
    assert len(bias_gradients) == 4  # qkv, the attention's projection, fc, the MLP's projection
    assert [op.name for op in bias_gradients if op not in before] == []


def xla_matmuls(recompute: str) -> tuple[int, list[np.ndarray]]:
    """(matmuls in XLA's optimized HLO, the results) of a mixed-bf16 block's loss and gradients, as a train
    step has them (the loss live, so the first forward pass is not dead code), at fixed weights."""
    keras.utils.set_random_seed(3)
    block = DecoderBlock(d_model=24, n_head=3, recompute=recompute, dtype="mixed_bfloat16")
    x = tf.random.stateless_normal([2, 11, 24], seed=[1, 2])
    block.build(x.shape)

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.cast(block(x, training=True), tf.float32))
        return [loss, *tape.gradient(loss, [x, *block.trainable_variables])]

    compiled = tf.function(step, jit_compile=True)
    text = compiled.experimental_get_compiler_ir(x)(stage="optimized_hlo")
    return text.count(" dot("), [tf.cast(t, tf.float32).numpy() for t in compiled(x)]


def test_recomputation_survives_xla_and_gives_the_gradients_of_none(monkeypatch):
    """The block's 6 forward matmuls (qkv, q kᵀ, p v, projection, MLP in and out) and 12 backward ones: 18 without
    recomputation; whole-block recomputation runs the forward's again (5 more: one XLA still shares). With
    ``tf.recompute_grad`` XLA merged them back: 18."""
    plain, expected = xla_matmuls("none")
    recomputed, results = xla_matmuls("full")
    assert (plain, recomputed) == (18, 23)
    for ours, reference in zip(results, expected, strict=True):
        np.testing.assert_allclose(ours, reference, rtol=3e-2, atol=3e-2 * np.abs(reference).max())
    monkeypatch.setattr(layers, "recompute_grad", tf.recompute_grad)
    assert xla_matmuls("full")[0] == 18


def constant_shapes(hlo_text: str) -> list[list[int]]:
    """The shape of every constant in an HLO module's text (its large values print as ``{...}``)."""
    found = re.findall(r"= \w+\[([\d,]*)\]\S* constant\(", hlo_text)
    return [[int(d) for d in dims.split(",") if d] for dims in found]


def test_a_compiled_blocks_causal_mask_is_made_in_the_step_not_folded_into_a_constant():
    # T is static under XLA: folded by the bridge, each mask (one per attention, again in the recomputation) was a
    # pred[T, T] constant, 195 MiB of gpt3-1.3b's micro-step at T = 2,048 (docs/benchmarks.md).
    length = 128
    block = DecoderBlock(d_model=32, n_head=2, recompute="full")
    x = tf.random.stateless_normal([1, length, 32], seed=[7, 8])
    block(x)

    @tf.function(jit_compile=True)
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = block(x, training=True)
        return y, tape.gradient(y, [x, *block.trainable_variables])

    shapes = constant_shapes(step.experimental_get_compiler_ir(x)(stage="hlo"))
    assert shapes and max(np.prod(s) for s in shapes) < length  # scalars and shape vectors only
    uncompiled = tf.function(step.python_function)(x)
    np.testing.assert_allclose(step(x)[0].numpy(), uncompiled[0].numpy(), rtol=1e-5, atol=1e-5)


def test_a_compiled_block_materialises_the_gelus_slope_and_the_probabilities_for_its_backward_pass():
    # Without the barriers XLA's GPU fusion kept the float32 tanh, the fc matmul's output and the GELU's output (32
    # bytes per [B·T, 4d] element in bf16 where the slope and output are 16), and the scores beside the
    # probabilities: gpt3-small's bf16 micro-step 637 -> 509 MiB in XLA's GPU buffer assignment
    # (bench/compiled_memory_bench.py, docs/benchmarks.md).
    length, d_model = 64, 32
    block = DecoderBlock(d_model=d_model, n_head=2)
    x = tf.random.stateless_normal([1, length, d_model], seed=[9, 10])
    block(x)

    @tf.function(jit_compile=True)
    def step(x):
        with tf.GradientTape() as tape:
            y = block(x, training=True)
        return tape.gradient(y, block.trainable_variables)

    hlo = step.experimental_get_compiler_ir(x)(stage="hlo")
    barriers = re.findall(r"= (.*?) opt-barrier\(", hlo)  # a shape, or a tuple of them
    shapes = [re.findall(r"\w+\[[\d,]*\]", result) for result in barriers]
    assert [f"f32[{length},{4 * d_model}]"] * 2 in shapes  # the GELU's output and slope
    assert [f"f32[1,2,{length},{length}]"] in shapes  # the attention core's probabilities
