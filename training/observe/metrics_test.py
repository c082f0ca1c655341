"""The log lines the chief prints, and the CloudWatch metric definitions that parse them: one format, two sides.

The definitions are infra's (``infra/plan_step/metric_definitions.py``), read here as data: training never
imports infra.
"""

import dataclasses
import math
import re
import runpy
import statistics
from pathlib import Path

import numpy as np
import pytest
from contract.health import Window

from observe.heartbeat import Heartbeat
from observe.metrics import (
    Evaluation,
    duration,
    health_line,
    model_flops_utilisation,
    perplexity,
    train_line,
    valid_line,
)
from observe.observer import health_fields

DEFINITIONS_FILE = Path(__file__).resolve().parents[2] / "infra" / "plan_step" / "metric_definitions.py"
METRIC_DEFINITIONS = runpy.run_path(str(DEFINITIONS_FILE))["METRIC_DEFINITIONS"]


def parse(line: str) -> dict[str, float]:
    """The metrics SageMaker records from one log line: each definition's first group, where its regex matches."""
    found = {}
    for definition in METRIC_DEFINITIONS:
        match = re.search(definition["Regex"], line)
        if match:
            found[definition["Name"]] = float(match.group(1))
    return found


def defined(kind: str) -> set[str]:
    """The names of the metrics of one kind: ``defined("train")`` = {"train:loss", ...}."""
    return {d["Name"] for d in METRIC_DEFINITIONS if d["Name"].startswith(kind + ":")}


def test_train_line_has_the_exact_format():
    line = train_line(120, 4.1234, 3e-4, 1234.5, 0.0123)
    # exp(4.1234) = 61.77 (the example line rounds it as 61.80)
    assert line == "[train] step=120 loss=4.1234 ppl=61.77 lr=3.000e-04 tokens_per_sec=1234.5 mfu=0.0123"
    people = train_line(120, 4.1234, 3e-4, 1234.5, 0.0123, max_steps=250, seconds_left=130.4)
    assert people == f"{line} | step 120 of 250, 2 min 10 s left"
    assert parse(people) == parse(line)
    assert train_line(5, 4.0, 1e-3, 1.0, 0.1, 250).endswith("| step 5 of 250")  # after the first step: no pace yet
    assert [duration(s) for s in (0.4, 59, 60, 3599, 3600, 11_100)] == [
        "0 s", "59 s", "1 min 00 s", "59 min 59 s", "1 h 00 min", "3 h 05 min"
    ]  # fmt: skip
    assert parse(line) == {
        "train:loss": 4.1234,
        "train:perplexity": 61.77,
        "train:learning_rate": 3e-4,
        "train:tokens_per_second": 1234.5,
        "train:mfu": 0.0123,
    }


def test_valid_lines_have_the_exact_format():
    line = valid_line(120, Evaluation(4.2, 0.031, 256))
    assert line == "[valid] step=120 val_loss=4.2000 val_loss_se=0.0310 val_ppl=66.69 sequences=256"
    assert parse(line) == {  # no training metric, none of the whole split's
        "validation:loss": 4.2,
        "validation:loss_standard_error": 0.031,
        "validation:perplexity": 66.69,
    }
    split = valid_line(250, Evaluation(4.15, 0.012, 1122), "valid_split")
    assert split == "[valid_split] step=250 val_loss=4.1500 val_loss_se=0.0120 val_ppl=63.43 sequences=1122"
    assert parse(split) == {
        "validation:split_loss": 4.15,
        "validation:split_loss_standard_error": 0.012,
        "validation:split_perplexity": 63.43,
    }


def test_standard_error_of_the_sequences_mean_loss():
    losses = [3.0, 4.0, 5.5, 4.5]
    e = Evaluation.from_sums(sum(losses), sum(x * x for x in losses), len(losses))
    assert (e.loss, e.sequences) == (4.25, 4)
    assert e.standard_error == pytest.approx(statistics.stdev(losses) / 2)


def test_bits_per_byte_is_nats_over_ln2_bytes_with_a_jackknife_sized_standard_error():
    rng = np.random.default_rng(0)
    size = rng.integers(40, 90, 200).astype(float)  # each sequence's target bytes
    nats = size * rng.normal(0.9, 0.2, 200)  # and its summed nats
    sums = (nats.sum(), size.sum(), (nats**2).sum(), (size**2).sum(), (nats * size).sum())
    e = Evaluation.from_sums(1.0, 1.0, 200, *sums)
    assert e.bits_per_byte == pytest.approx(nats.sum() / (math.log(2) * size.sum()), rel=1e-12)
    # The jackknife of the ratio, computed leaving one sequence out at a time: no formula shared with the code.
    leave_one_out = np.array([(nats.sum() - n) / (size.sum() - b) for n, b in zip(nats, size, strict=True)])
    jackknife = math.sqrt((len(nats) - 1) * ((leave_one_out - leave_one_out.mean()) ** 2).mean()) / math.log(2)
    assert e.bits_per_byte_se == pytest.approx(jackknife, rel=0.02)
    assert Evaluation.from_sums(1.0, 1.0, 2).bits_per_byte is None  # bytes unknown: none reported


def test_valid_line_carries_bits_per_byte_to_its_metrics():
    line = valid_line(120, Evaluation(4.2, 0.031, 256, 1.23456, 0.0123))
    assert line.endswith(" sequences=256 val_bpb=1.2346 val_bpb_se=0.0123")
    assert parse(line)["validation:bits_per_byte"] == 1.2346
    assert parse(line)["validation:bits_per_byte_standard_error"] == 0.0123
    split = parse(valid_line(250, Evaluation(4.15, 0.012, 1122, 1.2, 0.004), "valid_split"))
    assert (split["validation:split_bits_per_byte"], split["validation:split_bits_per_byte_standard_error"]) == (
        1.2,
        0.004,
    )


def test_valid_line_carries_each_sources_figures_beside_the_splits_and_they_leave_its_metrics_as_they_were():
    web, code = Evaluation(4.3, 0.05, 128, 1.31, 0.021), Evaluation(3.9, 0.04, 128)  # code: bytes unknown
    overall = Evaluation(4.2, 0.031, 256, 1.23456, 0.0123)
    line = valid_line(120, dataclasses.replace(overall, sources={"web-2": web, "code": code}))
    assert line == (
        valid_line(120, overall) + " val_loss_web_2=4.3000 val_bpb_web_2=1.3100 val_bpb_se_web_2=0.0210"
        " val_loss_code=3.9000"
    )
    assert parse(line) == parse(valid_line(120, overall))  # the split's metrics read as before


def test_perplexity_does_not_overflow():
    assert 1e300 < perplexity(1e6) < math.inf


def test_mfu_arithmetic():
    # 125M model at 2,048 context: 6 x 125.2M + 12 x 12 x 2048 x 768 = 0.98 GFLOP a token;
    # 100k tokens/s on 8 devices of 312 TFLOPS = 98 TFLOPS / 2,496 TFLOPS.
    flops = 6 * 125_226_240 + 12 * 12 * 2048 * 768
    assert model_flops_utilisation(100_000, flops, 8, 312.0) == pytest.approx(flops * 1e5 / 2.496e15)


def test_health_line_leaves_out_unknown_values():
    line = health_line(8, {"input_wait_pct": 38.25, "mem_pct": None, "skipped": 0})
    assert line == "[health] step=8 input_wait_pct=38.25 skipped=0"


def test_health_and_heartbeat_lines_feed_every_health_metric():
    window = Window(120, 4.1, 3e-4, 1234.5, 0.0123, 1.234, 0.3825, 0.551, 0.0665, 0, 31.2, 0.3901)
    assert parse(health_line(120, health_fields(window, 0.512, -0.5))) == {
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
    assert parse(Heartbeat(None).line()).keys() == {"health:seconds_since_step"}


def test_every_metric_definition_parses_a_line_the_chief_prints():
    window = Window(1, 4.0, 1e-3, 10.0, 0.1, 1.0, 0.1, 0.8, 0.1, 0, 1.0, 0.5)
    evaluation = Evaluation(4.0, 0.1, 8, 1.1, 0.01)
    lines = [train_line(1, 4.0, 1e-3, 10.0, 0.1), valid_line(1, evaluation), valid_line(1, evaluation, "valid_split")]
    lines.append(health_line(1, health_fields(window, 0.5, 1.0)))
    parsed = {name for line in [*lines, Heartbeat(None).line()] for name in parse(line)}
    assert parsed == {d["Name"] for d in METRIC_DEFINITIONS}
