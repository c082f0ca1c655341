import json

import numpy as np
import pytest
import tensorflow as tf
from checkpoint import Checkpointer, CheckpointMismatch
from engines import StrategyEngine
from gpt.model import GPT
from trainer import Trainer, make_optimizer

CONFIG = {"model": {"n_layer": 2, "d_model": 64, "vocab_size": 50}, "data": {"micro_batch_size": 2}}
BATCHES = [tf.constant(np.random.default_rng(i).integers(0, 50, [1, 1, 2, 9]), tf.int32) for i in range(4)]


def build(directory, *, seed=1, keep=3, is_chief=True, config=CONFIG):
    model = GPT.from_preset("tiny", vocab_size=50, sequence_length=8, seed=seed, dropout=0.3)
    engine = StrategyEngine(tf.distribute.get_strategy(), "default")
    trainer = Trainer(
        model, make_optimizer(model, 1e-2), engine, accumulation_steps=1, micro_batch_size=2, sequence_length=8
    )
    checkpointer = Checkpointer(directory, model, trainer, keep=keep, is_chief=is_chief, run_config=config)
    return model, trainer, checkpointer


def test_restore_continues_bit_for_bit_with_dropout(tmp_path):
    model, trainer, checkpointer = build(tmp_path)
    assert checkpointer.restore_latest() == 0  # nothing to restore yet
    for batch in BATCHES[:2]:
        trainer.train_step(batch)
    assert checkpointer.save().endswith("ckpt-2")
    checkpointer.wait()
    expected = [trainer.train_step(b).loss for b in BATCHES[2:]]

    model_b, trainer_b, checkpointer_b = build(tmp_path, seed=99)  # other weights and dropout seeds until restored
    assert checkpointer_b.restore_latest() == 2
    assert int(trainer_b.optimizer.iterations) == 2
    assert [trainer_b.train_step(b).loss for b in BATCHES[2:]] == expected
    for a, b in zip(model.get_weights(), model_b.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert json.loads((tmp_path / "run_config.json").read_text()) == CONFIG


def test_keeps_the_newest_and_only_the_chief_writes(tmp_path):
    _, trainer, checkpointer = build(tmp_path / "chief", keep=2)
    _, _, other = build(tmp_path / "other", is_chief=False)
    for _ in range(4):
        trainer.step.assign_add(1)
        checkpointer.save()
        assert other.save() is None
    checkpointer.wait()
    assert sorted(p.name for p in (tmp_path / "chief").glob("*.index")) == ["ckpt-3.index", "ckpt-4.index"]
    assert not (tmp_path / "other").exists()


def test_a_differently_shaped_model_is_refused(tmp_path):
    _, _, checkpointer = build(tmp_path)
    checkpointer.save()
    checkpointer.wait()
    other = {**CONFIG, "model": {**CONFIG["model"], "vocab_size": 51}}
    with pytest.raises(CheckpointMismatch, match="use another checkpoint_dir"):
        build(tmp_path, config=other)[2].restore_latest()
