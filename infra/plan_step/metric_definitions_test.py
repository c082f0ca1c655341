"""The metric definitions' regular expressions against the log lines train.py prints."""

import re

from infra.plan_step.metric_definitions import METRIC_DEFINITIONS

LINES = [
    "[train] step=120 loss=4.1234 ppl=61.80 lr=3.000e-04 tokens_per_sec=1234.5 mfu=0.0123",
    "[valid] step=120 val_loss=4.2000 val_ppl=66.69",
    "[health] step=120 input_wait_pct=38.25 compute_pct=55.1 sync_pct=6.65 step_s=0.512 grad_norm=1.234 skipped=0 "
    "peak_mem_gb=31.2 mem_pct=39.01 loss_drop_pct=-0.5",
    "[heartbeat] step=120 seconds_since_step=61.0",
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


def test_health_and_heartbeat_lines():
    assert parse(LINES[2]) == {
        "health:input_wait_percent": 38.25,
        "health:compute_percent": 55.1,
        "health:sync_percent": 6.65,
        "health:step_seconds": 0.512,
        "health:grad_norm": 1.234,
        "health:skipped_steps": 0,
        "health:peak_memory_gb": 31.2,
        "health:memory_percent": 39.01,
        "health:loss_drop_percent": -0.5,
    }
    assert parse(LINES[3]) == {"health:seconds_since_step": 61.0}
