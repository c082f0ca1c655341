import numpy as np
import pytest
import tensorflow as tf

from gpt.model import GPT, padded_vocab

VOCAB, LENGTH = 97, 16


def tiny(**kwargs) -> GPT:
    return GPT.from_preset("tiny", vocab_size=VOCAB, sequence_length=LENGTH, seed=3, **kwargs)


def random_ids(batch=2, length=LENGTH, seed=0) -> tf.Tensor:
    return tf.constant(np.random.default_rng(seed).integers(0, VOCAB, [batch, length]), tf.int32)


@pytest.mark.parametrize("t", [0, 5, LENGTH - 1])
def test_changing_token_t_changes_no_output_before_t(t):
    model = tiny()
    ids = random_ids()
    changed = tf.tensor_scatter_nd_update(ids, [[0, t], [1, t]], (ids[:, t] + 1) % VOCAB)
    before, after = model(ids).numpy(), model(changed).numpy()
    np.testing.assert_array_equal(before[:, :t], after[:, :t])  # the past does not see the future, bit for bit
    assert np.abs(before[:, t:] - after[:, t:]).max() > 1e-4  # and the token itself and later ones do change


def test_output_projection_is_tied_to_the_token_embedding():
    model = tiny()
    names = [v.path for v in model.trainable_variables]
    assert sum("embeddings" in n for n in names) == 2  # tokens and positions; no separate output matrix
    # Scaling the embedding table scales the logits' dependence on it: a change shows up in the logits.
    ids = random_ids()
    before = model(ids).numpy()
    model.token_embedding.embeddings.assign(model.token_embedding.embeddings * 1.5)
    assert not np.allclose(before, model(ids).numpy())


def test_mixed_precision_computes_in_bfloat16_and_returns_float32_logits():
    model = tiny(dtype="mixed_bfloat16")
    assert model.blocks[0].fc.compute_dtype == "bfloat16"
    assert model.token_embedding.embeddings.dtype == "float32"  # weights stay float32
    assert model(random_ids()).dtype == tf.float32


def loss_and_grads(model, ids):
    with tf.GradientTape() as tape:
        logits = model(ids[:, :-1], training=True)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(ids[:, 1:], logits))
    return loss, tape.gradient(loss, model.trainable_variables)


@pytest.mark.parametrize("recompute", ["full", "attention", "mlp", True])
def test_recompute_gives_the_same_gradients_with_dropout(recompute):
    plain, recomputed = tiny(dropout=0.2), tiny(dropout=0.2, recompute=recompute)
    recomputed.set_weights(plain.get_weights())  # same weights, same seed states
    ids = random_ids(length=LENGTH + 1)
    loss_a, grads_a = loss_and_grads(plain, ids)
    loss_b, grads_b = loss_and_grads(recomputed, ids)
    assert float(loss_a) == pytest.approx(float(loss_b), rel=1e-6)
    for a, b in zip(grads_a, grads_b, strict=True):
        np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b), rtol=1e-4, atol=1e-6)


def test_dropout_is_reproducible_from_the_seed_state():
    model = tiny(dropout=0.5)
    ids = random_ids()
    saved = [v.numpy() for v in model.seed_state_variables()]
    first = model(ids, training=True).numpy()
    second = model(ids, training=True).numpy()
    assert not np.allclose(first, second)  # the state advanced: a new mask
    for variable, value in zip(model.seed_state_variables(), saved, strict=True):
        variable.assign(value)
    np.testing.assert_array_equal(first, model(ids, training=True).numpy())
    assert len(model.seed_state_variables()) == 1 + model.n_layer  # embeddings + one per block


def test_config_round_trip_builds_the_same_shape():
    model = tiny(dropout=0.1, recompute="mlp")
    clone = GPT.from_config(model.get_config())
    assert clone.get_config() == model.get_config()
    assert clone.count_params() == model.count_params()
    assert clone.recompute == "mlp" and GPT.from_config({**model.get_config(), "recompute": True}).recompute == "full"


def test_the_embedding_is_padded_to_a_multiple_of_64_and_the_logits_are_not():
    model = tiny()  # VOCAB = 97 ids, 128 rows
    assert model.token_embedding.embeddings.shape[0] == 128 and padded_vocab(50_257) == 50_304
    ids = random_ids(length=LENGTH + 1)
    logits = model(ids[:, :-1])
    assert logits.shape[-1] == VOCAB  # the padded rows never reach the softmax
    kernel = model.token_embedding.embeddings
    reference = tf.matmul(model.ln_f(model.hidden_states(ids[:, :-1])), kernel[:VOCAB], transpose_b=True)
    np.testing.assert_allclose(logits.numpy(), reference.numpy(), rtol=1e-5, atol=1e-5)
    with tf.GradientTape() as tape:
        loss = model.loss_sum(ids[:, :-1], ids[:, 1:])
    (grad,) = tape.gradient(loss, [kernel])
    assert not np.any(tf.convert_to_tensor(grad)[VOCAB:].numpy())  # padded rows learn nothing


def test_the_heads_input_gradient_waits_for_its_embedding_gradient():
    """The blocks' backward pass needs only the input's gradient; without an edge the executor may take the
    embedding's last, the logits' gradient alive through every block's backward pass (docs/benchmarks.md)."""
    model = GPT.from_preset("tiny", vocab_size=64, sequence_length=8)

    @tf.function
    def gradients(ids):
        with tf.GradientTape() as tape:
            loss = model.loss_sum(ids[:, :-1], ids[:, 1:], training=True)
        return tape.gradient(loss, model.trainable_variables)

    ops = gradients.get_concrete_function(tf.TensorSpec([2, 9], tf.int32)).graph.get_operations()
    # the embedding's gradient, (xᵀ g)ᵀ: the transpose of a MatMul
    transposes = {c for op in ops if op.type == "MatMul" for c in op.outputs[0].consumers() if c.type == "Transpose"}
    assert transposes
    assert [op for op in ops if op.type == "MatMul" and transposes & set(op.control_inputs)]
