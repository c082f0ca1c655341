"""The command line: one estimate as a table, a stage's, every preset x instance type."""

from __future__ import annotations

import argparse
import json

import pytest

from infra.estimate.__main__ import main, token_count
from infra.instances import GPU_TRAINING_TYPES
from infra.presets import model_presets


@pytest.mark.parametrize(
    ("text", "count"), [("300B", 300 * 10**9), ("1.5T", 1.5e12), ("524288", 524_288), ("3e9", 3e9)]
)
def test_token_counts(text, count):
    assert token_count(text) == count


def test_token_count_rejects_words():
    with pytest.raises(argparse.ArgumentTypeError):
        token_count("lots")


def test_an_estimate_that_does_not_fit_prints_the_fixes_and_exits_1(capsys):
    args = ["--preset", "gpt3-1.3b", "--instance-type", "ml.p3.16xlarge", "--instance-count", "8", "--precision"]
    assert main([*args, "fp16", "--micro-batch-size", "4", "--global-batch-tokens", "1048576"]) == 1
    out = capsys.readouterr().out
    assert "1,315.7 M parameters" in out
    assert "of 16: DOES NOT FIT" in out
    assert "Smallest changes that fit:\n  1. training.instance_type = 'ml.p5e.48xlarge'" in out


def test_a_stage_estimate_exits_0_when_it_fits(capsys):
    assert main(["--stage", "prod", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["fits"] and summary["data_parallel_degree"] == 32


def test_an_invalid_layout_is_an_error_not_a_traceback(capsys):
    assert main(["--instance-type", "ml.p4d.24xlarge", "--model-parallel-degree", "3"]) == 2
    assert "model_parallel_degree 3" in capsys.readouterr().err


def test_all_lists_every_preset_on_every_gpu_type(capsys):
    assert main(["--all"]) == 0
    rows = capsys.readouterr().out.splitlines()[3:]
    assert len(rows) == len(model_presets()) * len(GPU_TRAINING_TYPES)
    p5_13b = next(r for r in rows if r.startswith("gpt3-13b   ml.p5.48xlarge"))
    assert "pp " in p5_13b  # 13 B needs pipeline stages even on 80 GiB parts
    assert next(r for r in rows if r.startswith("gpt3-13b   ml.g5.xlarge")).endswith("nothing fits")
