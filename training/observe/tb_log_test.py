import pytest
import tensorflow as tf
from contract.health_test import window

from observe.tb_log import TensorBoardLog


def scalars(folder):
    found = {}
    for path in folder.glob("events.out.tfevents.*"):
        for record in tf.compat.v1.train.summary_iterator(str(path)):
            for value in record.summary.value:
                assert value.metadata.plugin_data.plugin_name == "scalars"
                found[(value.tag, record.step)] = float(tf.make_ndarray(value.tensor))
    return found


def test_windows_and_validation_are_written_as_scalars(tmp_path):
    log = TensorBoardLog(str(tmp_path))
    log.window(window(10, 5.5))
    log.validation(10, 5.75)
    assert scalars(tmp_path / "train")[("loss", 10)] == 5.5
    assert scalars(tmp_path / "train")[("input_share", 10)] == pytest.approx(0.1)
    assert scalars(tmp_path / "validation") == {("loss", 10): 5.75}
    log.validation(20, 5.5, {"web": 5.25, "code-2": 6.0})
    assert scalars(tmp_path / "validation") == {("loss", 10): 5.75, ("loss", 20): 5.5, ("loss_web", 20): 5.25,
                                                ("loss_code-2", 20): 6.0}  # fmt: skip


def test_nothing_is_written_without_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a relative default folder would go
    log = TensorBoardLog(None, profile_start=1, profile_steps=2)
    log.before_step(1)
    log.window(window(1, 5.0))
    log.validation(1, 5.0)
    log.after_step(2)
    assert not log._profiling
    assert list(tmp_path.iterdir()) == []
