import collections

import keras
import numpy as np
import pytest
import tensorflow as tf
from data.channel import evaluation_dataset, open_channel, spread_sample, token_dataset
from gpt.model import GPT
from pile.bpe import token_byte_lengths
from tokenizers import Tokenizer

from conftest import SEQUENCE_LENGTH, while_loops
from run.engines import StrategyEngine
from run.schedule import WarmupCosine
from run.trainer import PRECISIONS, AdamW, Trainer, make_optimizer

T = 16


def build(engine, *, accumulation=1, micro=4, lr=3e-3, precision="fp32", dropout=0.0, vocab=384, seed=7, **kwargs):
    """A tiny GPT and its Trainer on ``engine`` (the pipeline tests' single-device reference too)."""
    with engine.scope():
        dtype = PRECISIONS[precision]
        model = GPT.from_preset("tiny", vocab_size=vocab, sequence_length=T, seed=seed, dropout=dropout, dtype=dtype)
        optimizer = make_optimizer(model, lr, weight_decay=0.1)
    trainer = Trainer(
        model,
        optimizer,
        engine,
        accumulation_steps=accumulation,
        micro_batch_size=micro,
        sequence_length=T,
        precision=precision,
        **kwargs,
    )
    return model, trainer


def default_engine():
    return StrategyEngine(tf.distribute.get_strategy(), "default")


def batches(dataset_dir, shape, n, seed=0):
    ds = token_dataset(open_channel(dataset_dir, "train"), sequence_length=T, batch_shape=shape, seed=seed)
    return [b for b in ds.take(n)]


def test_loss_decreases_on_real_text(dataset_dir):
    _, trainer = build(default_engine(), lr=1e-2, micro=8)
    data = batches(dataset_dir, (1, 1, 8), 30)
    losses = [trainer.train_step(b).loss for b in data]
    assert losses[0] == pytest.approx(np.log(384), rel=0.1)  # starts near uniform over the vocabulary
    assert np.mean(losses[-5:]) < losses[0] - 0.7, losses
    assert int(trainer.step) == 30 and int(trainer.optimizer.iterations) == 30


def test_accumulation_equals_one_big_batch(dataset_dir):
    (batch,) = batches(dataset_dir, (1, 2, 2), 1)
    model_a, accumulated = build(default_engine(), accumulation=2, micro=2)
    model_b, single = build(default_engine(), accumulation=1, micro=4)
    model_b.set_weights(model_a.get_weights())
    a = accumulated.train_step(batch)
    b = single.train_step(tf.reshape(batch, (1, 1, 4, T + 1)))
    assert a.loss == pytest.approx(b.loss, rel=1e-6) and a.grad_norm == pytest.approx(b.grad_norm, rel=1e-5)
    # Adam divides by sqrt(v): for near-zero gradients float rounding moves a weight by up to ~lr / 1000.
    for x, y in zip(model_a.get_weights(), model_b.get_weights(), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)


@pytest.mark.usefixtures("two_logical_cpus")
def test_two_mirrored_replicas_match_one_device_on_the_same_global_batch(dataset_dir, mirrored_engine):
    # The initial weights come from Keras' global generator (the model's seed is dropout's): seeded here, so the
    # near-zero gradients whose Adam steps float rounding moves are the same whichever tests ran before.
    keras.utils.set_random_seed(0)
    data = batches(dataset_dir, (2, 1, 2), 2)
    mirrored = mirrored_engine
    model_m, two = build(mirrored, micro=2)
    model_s, one = build(default_engine(), micro=4)
    model_s.set_weights(model_m.get_weights())
    for batch in data:
        m = two.train_step(batch)
        s = one.train_step(tf.reshape(batch, (1, 1, 4, T + 1)))  # the two replicas' halves, side by side
        assert m.loss == pytest.approx(s.loss, rel=1e-5)
    # Adam divides by sqrt(v) + 1e-8: where a gradient is near 1e-8, the replicas' summed halves and the one
    # device's full batch round differently and move the weight by up to ~1% of lr (seen: 3.2e-5 of lr 3e-3, one
    # weight of 16,384, in one run of the whole suite). A wrong sum moves most weights by about lr.
    for x, y in zip(model_m.get_weights(), model_s.get_weights(), strict=True):
        apart = np.abs(x - y) > 1e-5 + 1e-4 * np.abs(y)
        assert apart.mean() < 1e-3 and np.abs(x - y).max() < 0.05 * 3e-3, (apart.sum(), np.abs(x - y).max())
    assert two.tokens_per_step == one.tokens_per_step == 4 * T


def test_non_finite_gradients_never_reach_the_weights(dataset_dir):
    model, trainer = build(default_engine(), micro=2)
    (batch,) = batches(dataset_dir, (1, 1, 2), 1)
    before = model.get_weights()
    trainer.loss_scale.assign(float("nan"))  # scaled loss NaN -> NaN gradients, finite loss
    result = trainer.train_step(batch)
    assert not result.applied and np.isnan(result.grad_norm) and np.isfinite(result.loss)
    for x, y in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(x, y)
    assert int(trainer.optimizer.iterations) == 0
    assert result.skipped_steps == 1 and int(trainer.step) == 1  # counted, and the data moves on past the batch
    trainer.loss_scale.assign(1.0)
    assert trainer.train_step(batch).applied and int(trainer.optimizer.iterations) == 1  # the next step trains


@pytest.mark.usefixtures("two_logical_cpus")
@pytest.mark.parametrize("dropout", [0.5, 0.0])
def test_each_replica_draws_its_own_dropout_masks(dataset_dir, mirrored_engine, dropout):
    # The dropout seed states are mirrored variables: the same on both replicas, so without a stream of its own each
    # replica would drop the same units. Fed the same micro-batch, the two replicas' losses differ with dropout only.
    _, trainer = build(mirrored_engine, micro=2, dropout=dropout)
    (batch,) = batches(dataset_dir, (1, 1, 2), 1)
    same = tf.concat([batch, batch], axis=0)[:, 0]  # [2 replicas, 2, T + 1]: one micro-batch each, equal

    @tf.function
    def replica_losses(tokens):
        return mirrored_engine.run(lambda t: trainer._micro_grads(t, mirrored_engine.replica_index())[0], (tokens,))

    with mirrored_engine.scope():
        first, second = (float(x) for x in mirrored_engine.strategy.experimental_local_results(replica_losses(same)))
    assert (first != second) == (dropout > 0), (first, second)


def test_fp16_skips_overflowing_steps_and_halves_the_scale(dataset_dir):
    model, trainer = build(default_engine(), precision="fp16", micro=2, initial_loss_scale=2.0**127)
    first, *later = batches(dataset_dir, (1, 1, 2), 3)
    before = model.get_weights()
    assert not trainer.train_step(first).applied  # 2^127 x loss overflows
    assert float(trainer.loss_scale) == 2.0**126  # halved, once
    assert int(trainer.optimizer.iterations) == 0
    assert all(np.array_equal(x, y) for x, y in zip(before, model.get_weights(), strict=True))
    trainer.loss_scale.assign(2.0**8)  # small enough for float16 gradients: the next steps apply
    assert [trainer.train_step(b).applied for b in later] == [True, True]
    assert int(trainer.optimizer.iterations) == 2 and float(trainer.loss_scale) == 2.0**8
    assert not all(np.array_equal(x, y) for x, y in zip(before, model.get_weights(), strict=True))
    assert model.blocks[0].fc.compute_dtype == "float16"


def sequence_losses(model, channel) -> np.ndarray:
    """Each validation sequence's mean token loss, every sequence once."""
    ds = token_dataset(channel, sequence_length=T, batch_shape=(1, channel.manifest.sequences("validation")),
                       order="files")  # fmt: skip
    batch = next(iter(ds))
    logits = model(batch[0, :, :-1])
    return tf.nn.sparse_softmax_cross_entropy_with_logits(batch[0, :, 1:], logits).numpy().mean(axis=1)


@pytest.mark.parametrize("batches", [2, None])
def test_evaluation_is_the_mean_token_loss_with_its_standard_error_over_the_sequences(dataset_dir, batches):
    keras.utils.set_random_seed(0)  # initial weights whichever tests ran before (the model's seed is dropout's)
    model, trainer = build(default_engine())
    channel = open_channel(dataset_dir, "validation")
    losses = sequence_losses(model, channel)
    if batches:  # the fixed sample: 8 sequences spread over the split
        losses = losses[spread_sample(len(losses), 8)]
    ds = evaluation_dataset(channel, sequence_length=T, batch_shape=(1, 4), batches=batches)
    result = trainer.evaluate(ds)  # the whole split: 4 sequences a batch, the last one filled with weight 0
    assert result.sequences == len(losses) and (batches or len(losses) % 4)
    assert result.loss == pytest.approx(losses.mean(), rel=1e-5)
    # float32 sums of squares: a few digits go where the variance is small against the mean squared (untrained)
    assert result.standard_error == pytest.approx(losses.std(ddof=1) / np.sqrt(len(losses)), rel=1e-3)
    assert SEQUENCE_LENGTH >= T


def gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` (openai/gpt-2 src/encoder.py) inverted: each symbol of a token to its byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, codes, strict=True)}


@pytest.mark.parametrize("batches", [2, None])
def test_evaluation_reports_bits_per_byte_of_the_decoded_targets(dataset_dir, batches):
    keras.utils.set_random_seed(0)
    channel = open_channel(dataset_dir, "validation")
    tokenizer = Tokenizer.from_file(str(channel.tokenizer_path))
    model, trainer = build(default_engine(), token_bytes=token_byte_lengths(tokenizer, 384))
    ds = token_dataset(channel, sequence_length=T, batch_shape=(1, channel.manifest.sequences("validation")),
                       order="files")  # fmt: skip
    rows = next(iter(ds))[0]
    if batches:
        rows = tf.gather(rows, spread_sample(int(rows.shape[0]), 8))
    nats = tf.nn.sparse_softmax_cross_entropy_with_logits(rows[:, 1:], model(rows[:, :-1])).numpy().sum(axis=1)
    decoder, special = gpt2_byte_decoder(), set(tokenizer.get_added_tokens_decoder())
    decoded = [bytes(decoder[c] for i in row if i not in special for c in tokenizer.id_to_token(i)) for row in
               rows[:, 1:].numpy().tolist()]  # fmt: skip
    size = np.array([len(d) for d in decoded], dtype=float)
    assert b"".join(decoded).decode("utf-8", "replace")  # real text: the bytes the tokens decode to
    result = trainer.evaluate(evaluation_dataset(channel, sequence_length=T, batch_shape=(1, 4), batches=batches))
    assert result.bits_per_byte == pytest.approx(nats.sum() / (np.log(2) * size.sum()), rel=1e-5)
    ratio = nats.sum() / size.sum()
    delta = np.sqrt(((nats - ratio * size) ** 2).sum() / (len(size) * (len(size) - 1))) / size.mean() / np.log(2)
    assert result.bits_per_byte_se == pytest.approx(delta, rel=1e-2)
    without = build(default_engine())[1].evaluate(evaluation_dataset(channel, sequence_length=T, batch_shape=(1, 4)))
    assert without.bits_per_byte is None


def test_a_batch_of_another_shape_is_refused(dataset_dir):
    _, trainer = build(default_engine(), micro=4)
    with pytest.raises(ValueError, match="batch shape"):
        trainer.train_step(batches(dataset_dir, (1, 1, 8), 1)[0])


def graph_apply(optimizer, variables):
    """``optimizer.apply`` in a graph, as the trainer runs it."""
    return tf.function(lambda grads: optimizer.apply(grads, variables))


def test_adamw_updates_as_keras_adamw_does():
    """The one-kernel update (ResourceApplyAdam), its scalars once a step, against Keras' own AdamW: same
    weights after several steps of a learning-rate schedule, with weight decay on the matrix and none on the
    vector."""
    rng = np.random.default_rng(0)
    start = [rng.normal(size=(5, 3)).astype("float32"), rng.normal(size=3).astype("float32")]
    steps = [[rng.normal(size=w.shape).astype("float32") for w in start] for _ in range(4)]
    weights = []
    for optimizer_class in (AdamW, keras.optimizers.AdamW):
        variables = [keras.Variable(w) for w in start]
        schedule = WarmupCosine(peak=1e-2, warmup_steps=2, decay_steps=4, min_ratio=0.1)
        optimizer = optimizer_class(learning_rate=schedule, weight_decay=0.1, beta_1=0.9, beta_2=0.95, epsilon=1e-8)
        optimizer.exclude_from_weight_decay(var_list=variables[1:])
        optimizer.build(variables)
        apply = graph_apply(optimizer, variables)
        for grads in steps:
            apply([tf.constant(g) for g in grads])
        weights.append([v.numpy() for v in variables])
    for ours, keras_ones in zip(*weights, strict=True):
        np.testing.assert_allclose(ours, keras_ones, rtol=1e-6, atol=1e-7)
    assert not np.allclose(weights[0][0], start[0])


def test_adamw_takes_the_steps_scalars_once_and_each_variable_in_one_kernel():
    """Keras evaluates the schedule again for each decayed variable and raises β1, β2 to the step for each one;
    here the apply graph of four variables (three decayed) holds the schedule's cosine twice (Keras' apply reads
    the learning rate for the update, the decay reads it once), two powers, one Adam kernel per variable and one
    product per decayed variable."""
    variables = [keras.Variable(np.ones(shape, "float32")) for shape in [(4, 3), (3, 2), (2, 2), (3,)]]
    optimizer = AdamW(learning_rate=WarmupCosine(peak=1e-2, warmup_steps=2, decay_steps=4), weight_decay=0.1)
    optimizer.exclude_from_weight_decay(var_list=variables[3:])
    optimizer.build(variables)
    graph = graph_apply(optimizer, variables).get_concrete_function([tf.TensorSpec(v.shape) for v in variables]).graph
    count = collections.Counter(op.type for op in graph.get_operations())
    assert (count["Cos"], count["Pow"], count["ResourceApplyAdam"]) == (2, 2, 4), count
    decays = [op for op in graph.get_operations() if op.type == "Mul" and op.outputs[0].shape.rank == 2]
    assert len(decays) == 3, [op.name for op in decays]


@pytest.mark.parametrize("use_xla", [False, True])
def test_the_accumulation_loop_holds_one_micro_batch_at_a_time(use_xla):
    _, trainer = build(default_engine(), accumulation=3, micro=1, use_xla=use_xla)
    step = trainer._step.get_concrete_function(tf.TensorSpec(trainer.batch_shape, tf.int32))
    loops = while_loops(step)
    assert loops and all(parallel == 1 for _, parallel in loops), loops


@pytest.mark.parametrize(("precision", "loss_rel", "norm_rel"), [("fp32", 1e-6, 2e-6), ("bf16", 1e-3, 1e-2)])
def test_the_xla_compiled_micro_step_gives_the_plain_steps_losses(dataset_dir, precision, loss_rel, norm_rel):
    data = batches(dataset_dir, (1, 2, 2), 3)
    model_a, plain = build(default_engine(), accumulation=2, micro=2, precision=precision)
    model_b, xla = build(default_engine(), accumulation=2, micro=2, precision=precision, use_xla=True)
    model_b.set_weights(model_a.get_weights())
    for batch in data:
        a, b = plain.train_step(batch), xla.train_step(batch)
        # XLA fuses the casts and orders the sums its own way (and its softmax is exp(s - logsumexp s))
        assert b.loss == pytest.approx(a.loss, rel=loss_rel) and b.grad_norm == pytest.approx(a.grad_norm, rel=norm_rel)
