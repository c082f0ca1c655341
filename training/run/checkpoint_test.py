import json
import threading

import numpy as np
import pytest
import tensorflow as tf
from gpt.model import GPT

from run.checkpoint import Checkpointer, CheckpointMismatch
from run.engines import StrategyEngine
from run.trainer import Trainer, make_optimizer

CONFIG = {"model": {"n_layer": 2, "d_model": 64, "vocab_size": 50}, "data": {"micro_batch_size": 2}}
BATCHES = [tf.constant(np.random.default_rng(i).integers(0, 50, [1, 1, 2, 9]), tf.int32) for i in range(4)]


def build(directory, *, seed=1, keep=3, is_chief=True, config=CONFIG, sequences_per_step=1):
    model = GPT.from_preset("tiny", vocab_size=50, sequence_length=8, seed=seed, dropout=0.3)
    engine = StrategyEngine(tf.distribute.get_strategy(), "default")
    trainer = Trainer(
        model, make_optimizer(model, 1e-2), engine, accumulation_steps=1, micro_batch_size=2, sequence_length=8
    )
    checkpointer = Checkpointer(directory, model, trainer, keep=keep, is_chief=is_chief, run_config=config,
                                sequences_per_step=sequences_per_step)  # fmt: skip
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


@pytest.mark.parametrize("tear", ["cut short", "data missing"])
def test_a_torn_checkpoint_is_passed_over_for_the_one_before(tmp_path, capsys, tear):
    _, trainer, checkpointer = build(tmp_path)
    for _ in range(2):
        trainer.step.assign_add(1)
        checkpointer.save()
        checkpointer.wait()
    (data,) = tmp_path.glob("ckpt-2.data-*")  # what an upload caught half-way, or the index without its data
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2]) if tear == "cut short" else data.unlink()
    _, _, resumed = build(tmp_path)
    assert resumed.restore_latest() == 1
    assert f"[checkpoint] {tmp_path / 'ckpt-2'} is not whole" in capsys.readouterr().out


def test_the_chief_removes_what_a_killed_write_left(tmp_path):
    _, _, checkpointer = build(tmp_path)
    checkpointer.save()
    checkpointer.wait()
    for folder in ("ckpt-3_temp", "other"):  # TF writes ckpt-N into ckpt-N_temp/ first, then renames it
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"half a write")
    build(tmp_path, is_chief=False)
    assert (tmp_path / "ckpt-3_temp").is_dir()  # only the chief writes, so only the chief cleans
    assert build(tmp_path)[2].restore_latest() == 0
    assert not (tmp_path / "ckpt-3_temp").exists() and (tmp_path / "other").is_dir()
    assert (tmp_path / "ckpt-0.index").is_file()


def test_a_checkpoint_without_the_global_data_position_resumes_at_its_steps_worth(tmp_path, capsys):
    model, trainer, checkpointer = build(tmp_path)
    trainer.step.assign(5)
    before = {name: getattr(checkpointer.checkpoint, name) for name in (
        "model_weights", "optimizer_variables", "step", "loss_scale", "finite_steps_since_scale_change",
        "dropout_seed_states")}  # fmt: skip
    tf.train.Checkpoint(**before).write(str(tmp_path / "ckpt-5"))  # what the previous version saved
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-5"\n')
    restored, _, restoring = build(tmp_path, seed=99, sequences_per_step=8)
    assert restoring.restore_latest() == 5 and restoring.start_sequence == 40
    assert "has no global data position: resuming at sequence 40" in capsys.readouterr().out
    for a, b in zip(model.get_weights(), restored.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_differently_shaped_model_is_refused(tmp_path):
    _, _, checkpointer = build(tmp_path)
    checkpointer.save()
    checkpointer.wait()
    other = {**CONFIG, "model": {**CONFIG["model"], "vocab_size": 51}}
    with pytest.raises(CheckpointMismatch, match="use another checkpoint_dir"):
        build(tmp_path, config=other)[2].restore_latest()


@pytest.mark.usefixtures("two_logical_cpus")
def test_a_pipelined_checkpoint_restores_into_one_device_and_back(tmp_path):
    from run.pipeline_trainer_test import build_pipeline, build_single, random_batches

    batches = random_batches(4)

    def checkpointer(folder, model, trainer):
        config = {"model": {"n_layer": 2, "d_model": 64, "vocab_size": 97}}
        return Checkpointer(tmp_path / folder, model, trainer, keep=2, is_chief=True, run_config=config)

    def state(model, trainer):
        return model.get_weights() + [v.numpy() for v in trainer.optimizer.variables]

    pipelined, pipeline_trainer = build_pipeline(dropout=0.3)
    for batch in batches[:2]:
        pipeline_trainer.train_step(batch)
    saving = checkpointer("pipelined", pipelined, pipeline_trainer)
    saving.save()
    saving.wait()

    # Pipelined -> one device: the same weights, AdamW moments and step, bit for bit; dropout continues alike.
    single, trainer = build_single(dropout=0.3, seed=99)
    assert checkpointer("pipelined", single, trainer).restore_latest() == 2
    for a, b in zip(state(pipelined, pipeline_trainer), state(single, trainer), strict=True):
        np.testing.assert_array_equal(a, b)
    for batch in batches[2:]:  # float32 rounding apart (see pipeline_trainer_test): the same run continues
        assert trainer.train_step(batch).loss == pytest.approx(pipeline_trainer.train_step(batch).loss, rel=1e-6)

    # One device -> pipelined: a fresh pipelined model takes the single-device checkpoint, bit for bit.
    saving = checkpointer("single", single, trainer)
    saving.save()
    saving.wait()
    restored, restored_trainer = build_pipeline(dropout=0.3, seed=99)
    assert checkpointer("single", restored, restored_trainer).restore_latest() == 4
    for a, b in zip(state(single, trainer), state(restored, restored_trainer), strict=True):
        np.testing.assert_array_equal(a, b)
    assert restored.blocks[1].fc.kernel.value.device.endswith("CPU:1")  # restored in place, on the stage's device


def test_the_newest_checkpoint_is_the_highest_step_not_the_last_in_text_order(tmp_path):
    _, trainer, checkpointer = build(tmp_path)
    for step in (9, 10):  # as text, "9" sorts after "10"
        trainer.step.assign(step)
        checkpointer.save()
    checkpointer.wait()
    assert build(tmp_path)[2].restore_latest() == 10


def test_the_data_position_carries_over_a_resume_with_another_batch(tmp_path):
    _, trainer, checkpointer = build(tmp_path, sequences_per_step=8)
    trainer.step.assign(5)
    checkpointer.save()  # 5 steps of 8 sequences: the next is sequence 40
    checkpointer.wait()
    _, trainer, resized = build(tmp_path, sequences_per_step=4)
    assert resized.restore_latest() == 5 and resized.start_sequence == 40
    trainer.step.assign(7)
    resized.save()  # 2 more steps of 4: 48, not 7 x 4
    resized.wait()
    _, _, restored = build(tmp_path, sequences_per_step=4)
    assert restored.restore_latest() == 7 and restored.start_sequence == 48


def sharded(directory, hosts, barrier=None, **kwargs):
    """``hosts`` Checkpointers of one model (the replicas of data parallelism hold the same variables); their
    ``all_done`` meets at ``barrier`` (threads standing in for hosts) or, with none, passes."""
    model, trainer, _ = build(directory, **kwargs)
    flags: list[bool] = []

    def all_done(written):
        flags.append(written)
        barrier.wait()
        return all(flags)

    done = all_done if barrier else (lambda written: written)
    kwargs = {"keep": 2, "run_config": CONFIG, "hosts": hosts, "all_done": done}
    checkpointers = [Checkpointer(directory, model, trainer, is_chief=h == 0, host=h, **kwargs) for h in range(hosts)]
    return model, trainer, checkpointers


def test_two_hosts_write_their_shares_at_once_and_it_restores_on_one_and_on_three(tmp_path):
    _, trainer, writers = sharded(tmp_path, 2, threading.Barrier(2))
    for batch in BATCHES[:2]:
        trainer.train_step(batch)
    results = [None, None]

    def save(h):
        results[h] = writers[h].save()

    threads = [threading.Thread(target=save, args=(h,)) for h in range(2)]
    [t.start() for t in threads]
    [t.join(timeout=120) for t in threads]
    assert results == [str(tmp_path / "ckpt-2.json"), None]  # the chief publishes the manifest
    shares = json.loads((tmp_path / "ckpt-2.json").read_text())["shares"]
    sizes = [sum(int(tf.size(writers[0].variables[i])) for i in share) for share in shares]
    assert len(shares) == 2 and abs(sizes[0] - sizes[1]) / sum(sizes) < 0.1  # about half the bytes each
    expected = [v.numpy() for v in writers[0].variables]
    losses = [trainer.train_step(b).loss for b in BATCHES[2:]]

    for hosts in (1, 3):
        _, trainer_b, readers = sharded(tmp_path, hosts, seed=99)
        assert [reader.restore_latest() for reader in readers] == [2] * hosts
        for got, want in zip(readers[0].variables, expected, strict=True):
            np.testing.assert_array_equal(got.numpy(), want)  # every host holds every variable, bit for bit
        assert readers[0].start_sequence == 2
        assert [trainer_b.train_step(b).loss for b in BATCHES[2:]] == losses, hosts


def test_a_sharded_save_without_every_share_is_not_published_and_a_torn_one_is_skipped(tmp_path):
    _, trainer, (chief, other) = sharded(tmp_path, 2)
    trainer.train_step(BATCHES[0])
    other.save()
    assert chief.save().endswith("ckpt-1.json")
    trainer.train_step(BATCHES[1])
    chief.all_done = lambda written: False  # host 1 said its write failed
    assert chief.save() is None and not (tmp_path / "ckpt-2.json").exists()
    chief.all_done = lambda written: written
    trainer.train_step(BATCHES[2])
    other.save()
    chief.save()
    for path in tmp_path.glob("ckpt-3.share-1-of-2.data-*"):
        path.write_bytes(path.read_bytes()[:10])  # host 1's upload cut short
    _, _, (reader,) = sharded(tmp_path, 1, seed=99)
    assert reader.restore_latest() == 1
