"""The local run's summary: why training and validation loss differ, when they do."""

from __future__ import annotations

from local.summary import loss_gap


def test_close_losses_need_no_explanation():
    assert loss_gap(3.00, 3.10, 1_024_000, 500_000, 0.0) is None


def test_validation_above_training_after_several_epochs_is_memorisation():
    note = loss_gap(2.0, 3.1, 1_024_000, 256_000, 0.0)
    assert note.startswith("validation 1.10 above training: training read its 256,000 tokens 4.0 times")
    assert "more data, or fewer train_tokens" in note


def test_validation_above_training_in_a_first_epoch_is_generalisation():
    assert "differ from the training ones" in loss_gap(2.0, 3.1, 100_000, 256_000, 0.0)


def test_training_above_validation_is_the_windows_mean_and_dropout():
    note = loss_gap(4.0, 3.5, 100_000, 256_000, 0.1)
    assert note.startswith("training 0.50 above validation: the training figure is the mean of the last logging")
    assert note.endswith(", with dropout 0.1 on")
