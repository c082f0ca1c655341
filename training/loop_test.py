import re

import numpy as np
from hparams import parse_args
from loop import TrainingRun, weights_digest


def test_bf16_run_with_accumulation_and_xla_trains(dataset_dir, tmp_path, capsys):
    args = parse_args(
        [
            "--model_preset",
            "tiny",
            "--sequence_length",
            "16",
            "--micro_batch_size",
            "2",
            "--precision",
            "bf16",
            "--global_batch_tokens",
            "64",
            "--use_xla",
            "True",
            "--max_steps",
            "4",
            "--log_every",
            "1",
            "--learning_rate",
            "1e-2",
            "--lr_reference_tokens",
            "64",
            "--warmup_steps",
            "0",
            "--eval_every",
            "0",
            "--train_dir",
            str(dataset_dir),
            "--checkpoint_dir",
            str(tmp_path / "ckpt"),
        ],
        env={},
    )
    run = TrainingRun(args, env={})
    assert run.accumulation == 2  # 64 tokens = 2 sequences x 16 tokens x 1 replica x 2 micro-batches
    assert run.model.blocks[0].fc.compute_dtype == "bfloat16"
    run.train()
    output = capsys.readouterr().out
    assert "global_batch_tokens=64 accumulation_steps=2 peak_lr=1.000e-02 precision=bf16" in output
    losses = [float(x) for x in re.findall(r"^\[train\] step=\d+ loss=(\S+)", output, re.M)]
    assert len(losses) == 4 and np.isfinite(losses).all() and losses[-1] < losses[0]
    assert re.search(rf"^\[final\] worker=0 step=4 weights={weights_digest(run.model)}$", output, re.M)
