"""Data parallel or pipelined: chosen by model_parallel_degree, and the pipelined run's accumulation rule."""

from types import SimpleNamespace

import pytest
import tensorflow as tf
from contract.batch import BatchError

from run.parallelism import DataParallel, Pipelined, for_run, use_xla


def hparams(**values) -> SimpleNamespace:
    return SimpleNamespace(**{"model_parallel_degree": 1, "global_batch_tokens": 64, "microbatches": 0, **values})


def test_model_parallel_degree_chooses():
    assert type(for_run(hparams())) is DataParallel
    assert type(for_run(hparams(model_parallel_degree=2))) is Pipelined


def test_accumulation_steps():
    assert DataParallel(hparams(microbatches=3)).accumulation_steps(4) == 4
    assert Pipelined(hparams(microbatches=2)).accumulation_steps(4) == 4  # two passes of 2
    assert Pipelined(hparams(global_batch_tokens=0, microbatches=3)).accumulation_steps(1) == 3  # one pass of 3
    with pytest.raises(BatchError, match="microbatches"):
        Pipelined(hparams(microbatches=3)).accumulation_steps(4)


def test_use_xla_auto_is_on_with_a_gpu(monkeypatch):
    assert use_xla("auto") is False  # this CPU
    assert use_xla(True) is True and use_xla(False) is False
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: ["GPU:0"] if kind == "GPU" else [])
    assert use_xla("auto") is True  # whatever is recomputed: gpt/layers_test.py, recomputation survives XLA


def test_a_compiled_step_is_traced_when_built_and_the_first_step_runs_that_trace(mirrored_engine):
    # Traced before a checkpoint's restore, the compiled micro-step's name (the key of XLA's persistent cache,
    # run/compile_cache.py) does not depend on what the restore traced; compile_cache_test runs the restart.
    args = hparams(use_xla=True, weight_decay=0.1, adam_beta1=0.9, adam_beta2=0.95)
    model_arguments = {"vocab_size": 64, "sequence_length": 8, "n_layer": 1, "d_model": 16, "n_head": 2}
    _, trainer = DataParallel(args).build(
        mirrored_engine, 1e-3, model_arguments, accumulation_steps=2, micro_batch_size=2, sequence_length=8
    )
    assert trainer._step.experimental_get_tracing_count() == 1  # at build, before anything is restored
    trainer.train_step(tf.random.uniform(trainer.batch_shape, maxval=64, dtype=tf.int32, seed=3))
    assert trainer._step.experimental_get_tracing_count() == 1  # the step ran the trace made at build
