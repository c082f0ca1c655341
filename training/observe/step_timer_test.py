import time

import pytest
import tensorflow as tf
from run.engines import StrategyEngine

from observe.step_timer import StepTimer, WindowTimes, sync_probe


def test_window_splits_step_time_into_input_compute_and_sync():
    def batches():
        while True:
            time.sleep(0.03)
            yield 1

    timer, source = StepTimer(sync_probe=lambda: 0.01), batches()
    for _ in range(3):
        timer.next_batch(source)
        time.sleep(0.02)  # the step (the window's read waits for the device)
        timer.stepped()
    time.sleep(0.05)
    timer.paused(0.05)  # an evaluation: not step time
    times = timer.window()
    assert times.steps == 3
    assert times.input_s == pytest.approx(0.03, abs=0.015)
    assert times.sync_s == pytest.approx(0.01)
    assert times.compute_s == pytest.approx(0.01, abs=0.015)  # 0.02 measured, 0.01 of it the all-reduce
    assert timer.window().steps == 0  # the next window starts empty


def test_shares_add_up_to_one_and_a_single_replica_has_no_sync():
    times = WindowTimes(steps=2, input_s=1.0, compute_s=3.0, sync_s=0.0)
    assert [times.share(p) for p in ("input", "compute", "sync")] == [0.25, 0.75, 0.0]
    assert StepTimer().window().sync_s == 0.0


@pytest.mark.usefixtures("two_logical_cpus")
def test_sync_probe_times_an_all_reduce_over_two_replicas_and_is_none_for_one(mirrored_engine):
    variables = [tf.Variable(tf.ones([64, 64])), tf.Variable(tf.ones([64]))]
    mirrored = mirrored_engine
    probe = sync_probe(mirrored, variables)
    assert 0 < probe() < 5
    assert sync_probe(StrategyEngine(tf.distribute.get_strategy(), "default"), variables) is None


@pytest.mark.usefixtures("two_logical_cpus")
def test_the_sync_probe_sends_one_pack_not_every_gradient(mirrored_engine, monkeypatch):
    # gpt3-1.3b's gradients are 5.3 GB of float32: a probe of their size held twice that on every GPU.
    monkeypatch.setattr(mirrored_engine, "bytes_per_pack", 64 * 4, raising=False)
    variables = [tf.Variable(tf.ones([64, 64])), tf.Variable(tf.ones([64]))]  # 4,160 floats: 65 packs of 64
    sent = []
    real = mirrored_engine.sum_over_replicas
    monkeypatch.setattr(mirrored_engine, "sum_over_replicas", lambda value: sent.append(value.shape) or real(value))
    timed = []
    probe = sync_probe(mirrored_engine, variables)
    monkeypatch.setattr(time, "perf_counter", lambda: len(timed) + (timed.append(1) or 0))
    assert sorted({tuple(shape) for shape in sent}) == [(1,), (64,)]  # the wait, and one pack
    assert probe() == 1 + 65 * 1  # one second a reduction: the wait, then one pack for each of the 65
