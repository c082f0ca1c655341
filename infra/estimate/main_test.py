"""The command line: one estimate as a table, a stage's, every preset x instance type."""

from __future__ import annotations

import argparse
import json

import pytest

from infra.estimate.__main__ import main, token_count
from infra.instances import GPU_TRAINING_TYPES
from infra.training_code import model_presets


@pytest.mark.parametrize(
    ("text", "count"), [("300B", 300 * 10**9), ("1.5T", 1.5e12), ("524288", 524_288), ("3e9", 3e9)]
)
def test_token_counts(text, count):
    assert token_count(text) == count


def test_token_count_rejects_words():
    with pytest.raises(argparse.ArgumentTypeError):
        token_count("lots")


def test_an_estimate_that_does_not_fit_prints_the_fixes_and_exits_1(capsys):
    args = ["--preset", "gpt3-1.3b", "--instance-type", "ml.p3.16xlarge", "--instance-count", "8", "--no-recompute"]
    assert main([*args, "--precision", "fp16", "--micro-batch-size", "4", "--global-batch-tokens", "1048576"]) == 1
    out = capsys.readouterr().out
    assert "1,315.7 M parameters" in out
    assert "of 14.3 usable (16,160 MiB less 512 CUDA context and 1,050 TensorFlow reserve): DOES NOT FIT" in out
    assert "Smallest changes that fit:\n  1. training.model_parallel_degree = 8 (13.0 of 14.3" in out
    assert "\n  2. training.instance_type = 'ml.p5.48xlarge'" in out


def test_a_stage_estimate_exits_0_when_it_fits_its_memory_and_its_time_limit(capsys):
    assert main(["--stage", "prod", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["fits"] and summary["data_parallel_degree"] == 32
    assert summary["finishes"] and summary["needed_hours"] == 252.4 and summary["max_run_hours"] == 336
    assert summary["modelled"].startswith("modelled 34.7% MFU, 380,460 tokens/s")


def test_options_default_to_the_stage_so_the_estimate_agrees_with_synthesis(capsys):
    assert main(["--preset", "gpt3-125m", "--instance-type", "ml.g5.12xlarge"]) == 0  # dev: 1 B tokens
    out = capsys.readouterr().out
    assert "recompute attention" in out and "least recompute that fits: attention" in out  # recompute unset
    assert "of 20.1 usable (22,587 MiB less" in out and "TensorFlow reserve): fits" in out
    assert "time to 1 B tokens     2.8 hours" in out
    assert "4 h needed (+15% checkpoints, spot restarts; 0.5 h start-up) of max_run_hours 24: finishes" in out


def test_a_run_past_its_max_run_hours_exits_1_naming_both_numbers_and_the_fixes(capsys):
    assert main(["--stage", "prod", "--max-run-hours", "200"]) == 1
    out = capsys.readouterr().out
    assert "253 h needed (+15% checkpoints, spot restarts; 0.5 h start-up) of max_run_hours 200: DOES NOT FINISH" in out
    assert "The run would not finish: the run needs about 253 h but training.max_run_hours is 200" in out
    assert "219.0 h of training (300B tokens at 34.7% MFU, modelled)" in out
    assert "Set training.max_run_hours = 253 (SageMaker allows up to 672)" in out


def test_the_step_time_and_mfu_are_printed_as_modelled_and_today_s_code_misses_prod_s_limit(capsys):
    assert main(["--stage", "prod"]) == 0
    out = capsys.readouterr().out
    assert "Compute (modelled: after implementation, step_time.py)" in out
    assert "  MFU                    34.7% modelled; 380,460 tokens/s modelled" in out
    assert "2.756 s modelled = 4 x (matmuls 0.391 s + memory-bound 0.223 s) + optimizer 0.034 s" in out
    assert "+ all-reduce 0.266 s of 0.266 s (fp32, after the backward pass)" in out
    # The code as issue 37 found it (naive attention, no XLA, the all-reduce after backward): 18% MFU, 477 h.
    assert main(["--stage", "prod", "--implementation", "before"]) == 1
    out = capsys.readouterr().out
    assert "  MFU                    18.3% modelled" in out
    assert "477 h needed (+15% checkpoints, spot restarts; 0.5 h start-up) of max_run_hours 336: DOES NOT FINISH" in out


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--preset", "gpt2-small"], "error: --preset 'gpt2-small': expected one of tiny, small, gpt3-125m"),
        (["--preset", "gpt2-small"], "(did you mean 'gpt3-125m'?)\n"),
        (["--instance-type", "ml.p4d.24xl"], "not a type the estimate knows (did you mean 'ml.p4d.24xlarge'?)\n"),
        (["--stage", "qa"], "error: --stage 'qa': expected one of dev, prod\n"),
    ],
)
def test_a_bad_option_is_one_line_with_a_suggestion(capsys, args, line):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert line in err and err.count("\n") == 1


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
