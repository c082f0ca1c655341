"""The local run's summary: the validation figures with their standard errors, why training and validation
loss differ, when they do."""

from __future__ import annotations

from local.summary import loss_gap, mix_figures, validation_figures


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


LINES = [
    "[valid] step=100 val_loss=4.9000 val_loss_se=0.0400 val_ppl=134.29 sequences=256",
    "[train] step=250 loss=4.1000 ppl=60.34 lr=2.000e-04 tokens_per_sec=6000.0 mfu=0.5000",
    "[valid] step=250 val_loss=4.8000 val_loss_se=0.0390 val_ppl=121.51 sequences=256",
    "[valid_split] step=250 val_loss=4.8500 val_loss_se=0.0350 val_ppl=127.74 sequences=1122",
]


def test_the_summary_gives_the_last_sample_and_the_whole_split_with_their_standard_errors():
    assert validation_figures(LINES) == [
        "  Validation     loss 4.8000 ± 0.0390 (standard error), perplexity 121.51, 256 sequences at step 250",
        "    whole split  loss 4.8500 ± 0.0350 (standard error), perplexity 127.74, 1,122 sequences at step 250",
    ]
    assert validation_figures(LINES[:3]) == validation_figures(LINES)[:1]  # a run stopped before its end


def test_a_mix_gives_each_source_as_planned_as_trained_and_its_whole_split():
    plan = {"summary": {"mix": "code 70% = ...; web-2 30% = ...", "mix_sources": [{"name": "code"}, {"name": "web-2"}]}}
    lines = [
        "[config] preset=tiny weight_code=0.7000 sequences_code=700 epochs_code=0.100 weight_web_2=0.3000 "
        "sequences_web_2=300 epochs_web_2=2.500",
        "[valid_split] step=30 val_loss=4.1 val_loss_se=0.1 val_ppl=60.34 sequences=40 val_bpb=1.5 val_bpb_se=0.1 "
        "val_loss_code=4.0000 val_bpb_code=1.4000 val_bpb_se_code=0.0500 val_loss_web_2=4.5000 val_bpb_web_2=1.9000 "
        "val_bpb_se_web_2=0.2000",
    ]
    assert mix_figures(lines, plan) == [
        "  Mix            code 70% = ...; web-2 30% = ...",
        "    code         700 sequences (0.100 epochs) trained; whole split loss 4.0000, 1.4000 ± 0.0500 bits per byte",
        "    web-2        300 sequences (2.500 epochs) trained; whole split loss 4.5000, 1.9000 ± 0.2000 bits per byte",
    ]
    assert mix_figures(lines, {"summary": {"mix": "one source (no mix)", "mix_sources": []}}) == []
