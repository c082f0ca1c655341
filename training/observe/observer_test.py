"""The health rules on real tiny runs: input slowed on purpose reads input-bound, learning rate 0 a flat loss."""

import re
import time

import tensorflow as tf
from contract.hparams import parse_args
from run import loop
from run.loop import TrainingRun

from observe.report import REPORT_FILE


def tiny_run(dataset_dir, tmp_path, *extra):
    args = parse_args(
        [
            *("--model_preset", "tiny", "--sequence_length", "16", "--micro_batch_size", "2", "--max_steps", "24"),
            *("--log_every", "4", "--eval_every", "12", "--eval_batches", "2", "--warmup_steps", "0"),
            *("--lr_reference_tokens", "0", "--sample_tokens", "0", "--train_dir", str(dataset_dir)),
            *("--checkpoint_dir", str(tmp_path / "ckpt"), "--tensorboard_dir", str(tmp_path / "tb")),
            *("--profile_start", "3", "--profile_steps", "2"),
            *extra,
        ],
        env={},
    )
    return TrainingRun(args, env={})


def verdict(output: str, rule: str) -> str:
    return re.search(rf"^\[verdict\] {rule}: (.*)$", output, re.M)[1]


def test_slowed_input_is_reported_input_bound_with_its_share(dataset_dir, tmp_path, capsys, monkeypatch):
    real = loop.token_dataset

    def slow(*args, **kwargs):  # 50 ms of "reading" per batch: far longer than a tiny step
        return real(*args, **kwargs).map(lambda b: tf.numpy_function(lambda x: time.sleep(0.05) or x, [b], b.dtype))

    monkeypatch.setattr(loop, "token_dataset", slow)
    run = tiny_run(dataset_dir, tmp_path, "--learning_rate", "1e-2")
    run.train()
    out = capsys.readouterr().out
    result = verdict(out, "input-bound")
    assert result.startswith("PROBLEM: ")
    share = float(re.search(r"(\d+)% of step time waiting for data", result)[1])
    assert share > 50
    shares = [float(x) for x in re.findall(r"^\[health\] step=\d+ input_wait_pct=(\S+)", out, re.M)]
    # Most windows after the first (compilation) wait over half the step; the one after an evaluation waits less, as
    # the input pipeline's prefetch filled during the evaluation's pause (47.5% seen in a loaded full run).
    assert len(shares) == 6 and sorted(shares[1:])[2] > 50, shares
    assert verdict(out, "loss not decreasing").startswith("ok")
    report = (tmp_path / "tb" / REPORT_FILE).read_text()
    assert "input-bound" in report and report.count("<svg") == 6
    assert ">tokens</text>" in report and report.count('class="error-bar"') == 2  # the loss chart's extras
    # the fixed sample (2 batches x 2 sequences) at steps 12 and 24, then the whole split once
    assert re.findall(r"^\[valid\] step=(\d+) .* sequences=(\d+) val_bpb=\S+ val_bpb_se=\S+$", out, re.M) == [
        ("12", "4"),
        ("24", "4"),
    ]
    whole = run.inputs.validation.manifest.sequences("validation")
    assert re.search(
        rf"^\[valid_split\] step=24 val_loss=\S+ val_loss_se=\S+ val_ppl=\S+ sequences={whole} val_bpb=\S+ "
        r"val_bpb_se=\S+$",
        out,
        re.M,
    )
    assert (
        "<td>sample</td><td>24</td><td>4</td>" in report and f"<td>whole split</td><td>24</td><td>{whole:,}" in report
    )
    assert list((tmp_path / "tb" / "train").glob("events.out.tfevents.*"))
    assert list((tmp_path / "tb" / "train" / "plugins" / "profile").rglob("*.xplane.pb"))


def test_a_learning_rate_near_zero_is_reported_as_loss_not_decreasing(dataset_dir, tmp_path, capsys):
    run = tiny_run(dataset_dir, tmp_path, "--learning_rate", "1e-12")  # 0 itself is refused: it trains nothing
    run.train()
    out = capsys.readouterr().out
    assert verdict(out, "loss not decreasing").startswith("PROBLEM: mean loss fell ")
    assert verdict(out, "input-bound").startswith("ok")
