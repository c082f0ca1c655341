"""Metric definitions that turn the training log lines into CloudWatch metrics.

``training/train.py`` prints, on the chief worker:

    [train] step=120 loss=4.1234 ppl=61.80 lr=3.000e-04 tokens_per_sec=1234.5 mfu=0.0123
    [valid] step=120 val_loss=4.2000 val_ppl=66.69

SageMaker applies each regular expression to every log line and records the first group as the metric's value.
"""

from __future__ import annotations

NUMBER = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

METRIC_DEFINITIONS = [
    {"Name": "train:loss", "Regex": rf"\[train\] step=\d+ loss={NUMBER}"},
    {"Name": "train:perplexity", "Regex": rf"\[train\] .*ppl={NUMBER}"},
    {"Name": "train:learning_rate", "Regex": rf"\[train\] .*lr={NUMBER}"},
    {"Name": "train:tokens_per_second", "Regex": rf"\[train\] .*tokens_per_sec={NUMBER}"},
    {"Name": "train:mfu", "Regex": rf"\[train\] .*mfu={NUMBER}"},
    {"Name": "validation:loss", "Regex": rf"\[valid\] step=\d+ val_loss={NUMBER}"},
    {"Name": "validation:perplexity", "Regex": rf"\[valid\] .*val_ppl={NUMBER}"},
]
