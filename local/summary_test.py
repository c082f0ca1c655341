from local.summary import validation_figures

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
