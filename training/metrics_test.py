import re

import pytest
from metrics import health_line, model_flops_utilisation, perplexity, train_line, valid_line

# The regexes an infrastructure MetricDefinition would use.
TRAIN = re.compile(
    r"^\[train\] step=(\d+) loss=([0-9.]+) ppl=([0-9.]+) lr=([0-9.e+-]+) tokens_per_sec=([0-9.]+) mfu=([0-9.]+)$"
)
VALID = re.compile(r"^\[valid\] step=(\d+) val_loss=([0-9.]+) val_ppl=([0-9.]+)$")


def test_train_line_has_the_exact_format():
    line = train_line(120, 4.1234, 3e-4, 1234.5, 0.0123)
    # exp(4.1234) = 61.77 (the example line rounds it as 61.80)
    assert line == "[train] step=120 loss=4.1234 ppl=61.77 lr=3.000e-04 tokens_per_sec=1234.5 mfu=0.0123"
    assert TRAIN.match(line)


def test_valid_line_has_the_exact_format():
    line = valid_line(120, 4.2)
    assert line == "[valid] step=120 val_loss=4.2000 val_ppl=66.69"
    assert VALID.match(line)


def test_perplexity_does_not_overflow():
    assert perplexity(1e6) > 1e300


def test_mfu_arithmetic():
    # 125M model at 2,048 context: 6 x 125.2M + 12 x 12 x 2048 x 768 = 0.98 GFLOP a token;
    # 100k tokens/s on 8 devices of 312 TFLOPS = 98 TFLOPS / 2,496 TFLOPS.
    flops = 6 * 125_226_240 + 12 * 12 * 2048 * 768
    assert model_flops_utilisation(100_000, flops, 8, 312.0) == pytest.approx(flops * 1e5 / 2.496e15)


def test_health_line_leaves_out_unknown_values():
    line = health_line(8, {"input_wait_pct": 38.25, "mem_pct": None, "skipped": 0})
    assert line == "[health] step=8 input_wait_pct=38.25 skipped=0"
