"""The metric definitions' regular expressions against the log lines train.py prints."""

import re

from infra.workflow.metrics import METRIC_DEFINITIONS

LINES = [
    "[train] step=120 loss=4.1234 ppl=61.80 lr=3.000e-04 tokens_per_sec=1234.5 mfu=0.0123",
    "[valid] step=120 val_loss=4.2000 val_ppl=66.69",
]


def parse(line: str) -> dict[str, float]:
    found = {}
    for definition in METRIC_DEFINITIONS:
        match = re.search(definition["Regex"], line)
        if match:
            found[definition["Name"]] = float(match.group(1))
    return found


def test_training_line():
    assert parse(LINES[0]) == {
        "train:loss": 4.1234,
        "train:perplexity": 61.80,
        "train:learning_rate": 3e-4,
        "train:tokens_per_second": 1234.5,
        "train:mfu": 0.0123,
    }


def test_validation_line_does_not_feed_training_metrics():
    assert parse(LINES[1]) == {"validation:loss": 4.2, "validation:perplexity": 66.69}


def test_sagemaker_limits():
    assert len(METRIC_DEFINITIONS) <= 40
    assert all(len(d["Regex"]) <= 500 and len(d["Name"]) <= 255 for d in METRIC_DEFINITIONS)
