import dataclasses
import re

import numpy as np
import pytest
from contract.hparams import parse_args
from contract.presets import parameter_count

from conftest import TINY_RUN, write_dataset
from run.job import JobError
from run.loop import TrainingRun, weights_digest


def test_bf16_run_with_accumulation_and_xla_trains(dataset_dir, tmp_path, capsys):
    args = parse_args(
        [
            *TINY_RUN,
            *("--precision", "bf16", "--global_batch_tokens", "64", "--use_xla", "True", "--max_steps", "4"),
            *("--log_every", "1", "--learning_rate", "1e-2", "--lr_reference_tokens", "64", "--warmup_steps", "0"),
            *("--eval_every", "0", "--train_dir", str(dataset_dir), "--checkpoint_dir", str(tmp_path / "ckpt")),
        ],
        env={},
    )
    run = TrainingRun(args, env={})
    assert run.accumulation == 2  # 64 tokens = 2 sequences x 16 tokens x 1 replica x 2 micro-batches
    assert run.model.blocks[0].fc.compute_dtype == "bfloat16"
    assert run.trainer._micro_grads._jit_compile is True  # --use_xla reached the micro-batch step's tf.function
    run.train()
    output = capsys.readouterr().out
    assert "global_batch_tokens=64 accumulation_steps=2 peak_lr=1.000e-02 precision=bf16" in output
    losses = [float(x) for x in re.findall(r"^\[train\] step=\d+ loss=(\S+)", output, re.M)]
    assert len(losses) == 4 and np.isfinite(losses).all() and losses[-1] < losses[0]
    assert re.search(rf"^\[final\] worker=0 step=4 weights={weights_digest(run.model)}$", output, re.M)


def pipeline_args(dataset_dir, tmp_path, *extra):
    return parse_args(
        [
            *TINY_RUN,
            *("--model_parallel_degree", "2", "--global_batch_tokens", "128", "--microbatches", "2"),
            *("--precision", "bf16", "--dropout", "0.1", "--max_steps", "3", "--log_every", "1"),
            *("--learning_rate", "1e-2", "--lr_reference_tokens", "0", "--warmup_steps", "0"),
            *("--eval_every", "3", "--eval_batches", "1", "--sample_tokens", "2"),
            *("--train_dir", str(dataset_dir), "--checkpoint_dir", str(tmp_path / "ckpt")),
            *("--export_dir", str(tmp_path / "model"), *extra),
        ],
        env={},
    )


@pytest.mark.usefixtures("two_logical_cpus")
def test_pipelined_bf16_run_trains_checkpoints_and_exports(dataset_dir, tmp_path, capsys):
    run = TrainingRun(pipeline_args(dataset_dir, tmp_path), env={})
    # 128 tokens = 2 sequences x 16 tokens x 1 replica x 4 micro-batches, in 2 GPipe passes of 2
    assert (run.engine.name, run.accumulation, run.trainer.passes) == ("pipeline", 4, 2)
    assert run.model.blocks[1].fc.kernel.value.device.endswith("CPU:1")
    run.train()
    run.finish()
    output = capsys.readouterr().out
    assert "engine=pipeline workers=1 replicas=1" in output
    assert "model_parallel_degree=2 microbatches=2 stages=[1, 1]" in output
    losses = [float(x) for x in re.findall(r"^\[train\] step=\d+ loss=(\S+)", output, re.M)]
    assert len(losses) == 3 and np.isfinite(losses).all() and losses[-1] < losses[0]
    assert re.search(r"^\[valid\] step=3 val_loss=\S+", output, re.M)
    assert (tmp_path / "ckpt" / "ckpt-3.index").is_file() and (tmp_path / "model" / "1" / "saved_model.pb").is_file()
    assert re.search(r"^\[sample\] ", output, re.M)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--use_xla", "True"], "XLA compiles a function for one device"),
        (["--microbatches", "3"], "microbatches 3 is not valid; expected 0 or a divisor of the 4 micro-batches"),
    ],
)
def test_pipeline_configurations_that_cannot_run_are_refused(dataset_dir, tmp_path, extra, message):
    with pytest.raises(JobError, match=message):
        TrainingRun(pipeline_args(dataset_dir, tmp_path, *extra), env={})


def test_a_llama_preset_is_refused_before_anything_is_built(dataset_dir, tmp_path):
    args = parse_args(["--model_preset", "llama-tiny", "--train_dir", str(dataset_dir), "--max_steps", "1"], env={})
    with pytest.raises(JobError, match=r"model_preset llama-tiny: train.py trains the gpt presets only"):
        TrainingRun(args, env={})


def test_shape_overrides_reach_the_model(dataset_dir, tmp_path, capsys):
    args = parse_args(
        [
            *("--model_preset", "small", "--n_layer", "1", "--d_model", "32", "--n_head", "4"),
            *("--sequence_length", "16", "--micro_batch_size", "2", "--max_steps", "1", "--eval_every", "0"),
            *("--train_dir", str(dataset_dir), "--checkpoint_dir", str(tmp_path / "ckpt")),
        ],
        env={},
    )
    run = TrainingRun(args, env={})
    assert (run.model.n_layer, run.model.d_model, run.model.n_head) == (1, 32, 4)
    assert run.run_config()["model"]["n_layer"] == 1
    vocab = run.inputs.vocab_size
    assert run.model.count_params() == parameter_count(run.shape, vocab_size=vocab, sequence_length=16)
    # A padded embedding does not restore from a checkpoint of vocab_size rows (written before the padding):
    # the run's model config says so, and the checkpointer refuses such a checkpoint by name.
    assert run.run_config()["model"].get("embedding_rows") == (None if vocab % 64 == 0 else -(-vocab // 64) * 64)
    run.train()
    config = capsys.readouterr().out.splitlines()[0]
    # small's recipe: 2e-3 at 4,096 tokens a step; this run's batch is 32 tokens, and it is said so
    assert "peak_lr=2.000e-03" in config and 'departs_from_recipe="global batch 32 tokens' in config


def test_each_source_is_evaluated_apart_and_the_whole_split_needs_no_pass_of_its_own(tmp_path, mixed_dataset_dir):
    def training_run(dataset, *extra):
        args = [
            *TINY_RUN,
            "--eval_every",
            "1",
            "--train_dir",
            str(dataset),
            "--checkpoint_dir",
            str(tmp_path / dataset.name),
        ]
        args += extra
        return TrainingRun(parse_args(args, env={}), env={})

    mixed = training_run(mixed_dataset_dir, "--source_weights", "code=1,mail=1")
    assert sorted(mixed.validation_datasets(2)) == ["", "code", "mail"]  # the split's sample and each source's
    whole = mixed.validation_datasets(None)
    assert sorted(whole) == ["code", "mail"]  # every sequence once: the split's figures are the sources' sums
    evaluation = mixed.evaluate(whole)
    assert evaluation.sequences == 441 and [e.sequences for e in evaluation.sources.values()] == [221, 220]
    one = training_run(write_dataset(tmp_path / "web", sources=("web",)))  # one named source: the split is it
    datasets = one.validation_datasets(2)
    evaluation = one.evaluate(datasets)
    assert list(datasets) == [""] and evaluation.sources == {"web": dataclasses.replace(evaluation, sources={})}


class HostReads:
    """Counts the reads of a tensor's value on the host (every ``numpy()``, ``float()``, ``bool()``, ``int()`` of an
    eager tensor goes through ``_EagerTensorBase._numpy``, tensorflow/python/framework/ops.py), by training step."""

    def __init__(self, monkeypatch):
        from observe.observer import RunObserver
        from tensorflow.python.framework import ops

        self.step, self.by_step = 0, {}
        read, launch = ops._EagerTensorBase._numpy, RunObserver.step

        def counted_read(tensor):
            self.by_step[self.step] = self.by_step.get(self.step, 0) + 1
            return read(tensor)

        def counted_launch(observer, step, *args):
            self.step = step
            return launch(observer, step, *args)

        monkeypatch.setattr(ops._EagerTensorBase, "_numpy", counted_read)
        monkeypatch.setattr(RunObserver, "step", counted_launch)


def test_a_step_reads_nothing_back_and_a_logging_window_reads_once(dataset_dir, tmp_path, monkeypatch):
    args = parse_args(
        [
            *TINY_RUN,
            *("--max_steps", "13", "--log_every", "4", "--eval_every", "0", "--checkpoint_every", "0"),
            *("--train_dir", str(dataset_dir), "--checkpoint_dir", str(tmp_path / "ckpt")),
        ],
        env={},
    )
    run = TrainingRun(args, env={})
    reads = HostReads(monkeypatch)
    run.train()
    # Step 1 is waited for (it compiles; the time left is timed from its end); steps 4, 8 and 12 end a logging window,
    # whose one read gives every figure of its [train] and [health] lines; step 13 also checkpoints and ends the run.
    steps = {step: reads.by_step.get(step, 0) for step in range(1, 13)}
    assert steps == {**dict.fromkeys(range(1, 13), 0), 1: 1, 4: 1, 8: 1, 12: 1}, steps


def test_a_validation_split_smaller_than_its_sample_is_read_whole_and_said_so(tmp_path, mixed_dataset_dir, capsys):
    """A sample of 600 from a split of 441 (code 221, mail 220) would count sequences twice: each is read once."""
    args = [*TINY_RUN, "--train_dir", str(mixed_dataset_dir), "--checkpoint_dir", str(tmp_path / "ckpt")]
    run = TrainingRun(parse_args([*args, "--source_weights", "code=1,mail=1"], env={}), env={})
    assert run.engine.workers * run.engine.local_replicas * run.args.micro_batch_size == 2
    capsys.readouterr()
    evaluation = run.evaluate(run.validation_datasets(300))  # 300 batches of 2
    assert evaluation.sequences == 441 and [e.sequences for e in evaluation.sources.values()] == [221, 220]
    assert capsys.readouterr().out.splitlines() == [
        f"[valid_sample] the validation split{of} holds {n} sequences, fewer than the sample of 600: each "
        "evaluation reads every one once"
        for of, n in (("", 441), (" of code", 221), (" of mail", 220))
    ]
    run.validation_datasets(200)  # 400: the split's sample, each source's split whole
    assert [line.split(" holds")[0] for line in capsys.readouterr().out.splitlines()] == [
        "[valid_sample] the validation split of code",
        "[valid_sample] the validation split of mail",
    ]
