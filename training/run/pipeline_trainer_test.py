import json
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from gpt.pipeline.model import PipelinedGPT

from conftest import free_ports, while_loops
from run.pipeline_trainer import (
    PipelineEngine,
    PipelineTrainer,
    build_pipeline_replicas,
    make_pipeline_engine,
    pipeline_layout,
)
from run.trainer import PRECISIONS
from run.trainer_test import T, build, default_engine

pytestmark = pytest.mark.usefixtures("two_logical_cpus")
VOCAB = 97  # T, the sequence length, is trainer_test.py's 16


def build_pipeline(
    *, seed=7, accumulation=4, microbatches=2, micro=2, lr=3e-3, dropout=0.0, replicas=1, precision="fp32",
    engine_options=None, **kwargs,
):  # fmt: skip
    """K = 2 pipeline replicas on logical CPUs (replica r on CPU 2r and 2r + 1), like the training run builds them;
    ``engine_options``: PipelineEngine's others (workers, communication)."""
    engine = PipelineEngine([[f"/CPU:{2 * r}", f"/CPU:{2 * r + 1}"] for r in range(replicas)], **(engine_options or {}))
    keras.utils.set_random_seed(seed)  # the same initial weights in every run

    def model(devices):
        return PipelinedGPT.from_preset(
            "tiny",
            vocab_size=VOCAB,
            sequence_length=T,
            seed=seed,
            dropout=dropout,
            devices=devices,
            dtype=PRECISIONS[precision],
        )

    models, optimizers = build_pipeline_replicas(engine, model, lr, weight_decay=0.1)
    trainer = PipelineTrainer(
        models,
        optimizers,
        engine,
        accumulation_steps=accumulation,
        microbatches=microbatches,
        micro_batch_size=micro,
        sequence_length=T,
        precision=precision,
        **kwargs,
    )
    return models[0], trainer


def build_single(*, accumulation=4, micro=2, **kwargs):
    """The single-device reference: trainer_test's tiny GPT and Trainer at this file's vocabulary."""
    return build(default_engine(), accumulation=accumulation, micro=micro, vocab=VOCAB, **kwargs)


def random_batches(n, shape=(1, 4, 2), seed=0):
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.integers(0, VOCAB, (*shape, T + 1)), tf.int32) for _ in range(n)]


def test_steps_match_the_single_device_trainer_with_dropout_and_two_passes():
    # 4 micro-batches a step in 2 GPipe passes of 2; dropout on (each block's seed advances once per micro-batch
    # in both); the gradient norm (~2) is clipped to 1.
    pipelined, pipeline_trainer = build_pipeline(dropout=0.1)
    single, trainer = build_single(dropout=0.1)
    single.set_weights(pipelined.get_weights())
    for batch in random_batches(3):
        a, b = pipeline_trainer.train_step(batch), trainer.train_step(batch)
        # float32, the same arithmetic in another order (per-stage sums of squares for the norm): seen equal
        # losses, norms within 2e-7 relative.
        assert a.loss == pytest.approx(b.loss, rel=1e-6) and a.grad_norm == pytest.approx(b.grad_norm, rel=1e-5)
        assert a.applied and b.applied and a.grad_norm > 1.0
    # Adam divides by sqrt(v): for near-zero gradients float rounding moves a weight by up to ~lr / 1000.
    for x, y in zip(pipelined.get_weights(), single.get_weights(), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
    assert int(pipeline_trainer.optimizer.iterations) == int(pipeline_trainer.step) == 3


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_steps_match_the_single_device_trainer(precision):
    pipelined, pipeline_trainer = build_pipeline(precision=precision)
    single, trainer = build_single(precision=precision)
    single.set_weights(pipelined.get_weights())
    assert pipelined.blocks[1].fc.compute_dtype == {"bf16": "bfloat16", "fp16": "float16"}[precision]
    for batch in random_batches(2):
        a, b = pipeline_trainer.train_step(batch), trainer.train_step(batch)
        # 16-bit activations cross the stage boundary unchanged (seen: loss and norm equal to the last bit).
        assert a.loss == pytest.approx(b.loss, rel=1e-5) and a.grad_norm == pytest.approx(b.grad_norm, rel=1e-4)
    if precision == "fp16":
        assert float(pipeline_trainer.loss_scale) == float(trainer.loss_scale) == 2.0**15


def test_adamw_and_gradient_buffers_stay_on_their_stages_devices():
    model, trainer = build_pipeline()
    trainer.train_step(random_batches(1)[0])
    slots = [v for v in trainer.optimizer.variables if "momentum" in v.path or "velocity" in v.path]
    for variable in model.trainable_variables:
        device = variable.value.device
        name = variable.path.split("/", 1)[1].replace("/", "_")
        assert [s.value.device for s in slots if name in s.path] == [device, device], variable.path
    assert [b.device for b in trainer.buffers[0]] == [v.value.device for v in model.trainable_variables]
    # Keras leaves the update arithmetic unplaced (TensorFlow would run it on device 0); PlacedAdamW places it.
    graph = tf.function(trainer._apply_fn).get_concrete_function(()).graph
    arithmetic = [
        op
        for op in graph.get_operations()
        if op.type in ("Mul", "Sub", "AddV2", "Sqrt", "RealDiv", "Square") and op.outputs[0].shape.rank
    ]
    assert arithmetic and all(op.device for op in arithmetic), [op.name for op in arithmetic if not op.device]
    assert {op.device[-5:] for op in arithmetic} == {"CPU:0", "CPU:1"}
    adam = [op for op in graph.get_operations() if op.type == "ResourceApplyAdam"]  # each variable's update kernel
    assert len(adam) == len(model.trainable_variables) and {op.device[-5:] for op in adam} == {"CPU:0", "CPU:1"}


def test_microbatches_must_divide_the_steps_micro_batches():
    with pytest.raises(ValueError, match="microbatches 3 is not valid; expected 0 or a divisor of the 4 micro-batches"):
        build_pipeline(accumulation=4, microbatches=3)


REPLICAS_SCRIPT = """
import json, sys
import numpy as np
import tensorflow as tf
from run.pipeline_trainer import split_cpu
assert split_cpu(4) == 4 and len(tf.config.list_logical_devices("CPU")) == 4  # initialised: conftest keeps it
from run.pipeline_trainer_test import build_pipeline, build_single, random_batches

pipelined, pipeline_trainer = build_pipeline(replicas=2, seed=7)  # replica 1 starts from other weights ...
single, trainer = build_single(seed=7, micro=4)
single.set_weights(pipelined.get_weights())
results = []
for batch in random_batches(2, shape=(2, 4, 2)):
    # ... the global batch: replica 0's 2 sequences, then replica 1's, in each micro-batch
    a = pipeline_trainer.train_step(batch)
    b = trainer.train_step(tf.concat([batch[0:1], batch[1:2]], axis=2))
    results.append([a.loss, b.loss, a.grad_norm, b.grad_norm])
replica_1 = pipeline_trainer.models[1]
print(json.dumps({
    "steps": results,
    "replicas_equal": all(np.array_equal(x, y) for x, y in zip(replica_1.get_weights(), pipelined.get_weights())),
    "from_single": max(float(np.abs(x - y).max()) for x, y in zip(replica_1.get_weights(), single.get_weights())),
    "devices": sorted({v.value.device[-5:] for v in replica_1.variables}),
}))
"""


def in_four_cpus(script: str):
    """The JSON that ``script`` prints last, run in a new process: four logical CPUs must be set up before
    TensorFlow starts."""
    training = Path(__file__).parents[1]
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=training,
        env={"PYTHONPATH": f"{training}", "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


NCCL_SCRIPT = """
import json
import tensorflow as tf
from run.pipeline_trainer import split_cpu
assert split_cpu(4) == 4 and len(tf.config.list_logical_devices("CPU")) == 4  # initialised: conftest keeps it
from run.engines_test import collectives
from run.pipeline_trainer_test import build_pipeline

seen = set()
for precision in ("fp32", "bf16", "fp16"):
    # As a GPU host builds it: NCCL collectives; 2 hosts of 2 replicas (traced only: nothing runs).
    options = {"communication": "nccl", "workers": 2}
    _, trainer = build_pipeline(replicas=2, precision=precision, dropout=0.1, engine_options=options)
    functions = [
        trainer._step.get_concrete_function(tf.TensorSpec(trainer.batch_shape, tf.int32)),
        trainer._broadcast.get_concrete_function(),
        trainer._evaluate.get_concrete_function(tf.TensorSpec([2, 2, 18], tf.int32)),
        trainer.engine.worker_sum.get_concrete_function(tf.TensorSpec([2, 2], tf.float32)),
    ]
    for op in (op for f in functions for op in collectives(f)):
        seen.add((op.op, tf.as_dtype(op.attr["T"].type).name, op.attr["communication_hint"].s.decode()))
print(json.dumps(sorted(seen)))
"""


def test_every_collective_of_the_pipeline_on_gpu_hosts_has_a_dtype_nccl_takes():
    # engines_test's check of the data-parallel steps, for the pipeline's: its CollectiveReduce ops carry the "nccl"
    # hint on GPU hosts, and NcclManager takes five dtypes (engines_test.NCCL_DTYPES).
    from run.engines_test import NCCL_DTYPES

    seen = in_four_cpus(NCCL_SCRIPT)
    assert {op for op, _, _ in seen} == {"CollectiveReduce"} and {hint for *_, hint in seen} == {"nccl"}
    assert {dtype for _, dtype, _ in seen} <= {d.name for d in NCCL_DTYPES}, seen


def test_two_pipeline_replicas_sum_their_gradients_like_one_device_on_the_global_batch():
    report = in_four_cpus(REPLICAS_SCRIPT)
    assert report["devices"] == ["CPU:2", "CPU:3"]  # replica 1 lives on the other two devices
    for pipelined_loss, loss, pipelined_norm, norm in report["steps"]:
        assert pipelined_loss == pytest.approx(loss, rel=1e-6) and pipelined_norm == pytest.approx(norm, rel=1e-5)
    # Replica 1 was broadcast replica 0's initial weights, then took the same all-reduced steps: bit-identical.
    assert report["replicas_equal"]
    # Within 1e-4 of one device (seen 2e-5): the first Adam steps move every weight by about lr x sign(gradient),
    # so float rounding in near-zero gradients shows in a few weights.
    assert report["from_single"] < 1e-4, report


def test_two_hosts_each_driving_a_pipeline_end_with_identical_weights(dataset_dir, tmp_path):
    # Data parallelism across hosts: two train.py workers (TF_CONFIG), each splitting its CPU into K = 2 devices.
    from train_test import BASE, digests, run_script

    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    args = [*BASE, "--max_steps", "2", "--warmup_steps", "1", "--log_every", "1", "--eval_every", "2"]
    args += ["--eval_batches", "1"]
    args += ["--sample_tokens", "0", "--train_dir", str(dataset_dir), "--checkpoint_dir", str(tmp_path / "ckpt")]
    args += ["--model_parallel_degree", "2", "--microbatches", "2"]
    processes = []
    for index in range(2):
        env = {
            "TF_CONFIG": json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}),
            "SM_MODEL_DIR": str(tmp_path / f"model-{index}"),
            "SM_OUTPUT_DIR": str(tmp_path / f"output-{index}"),
        }
        processes.append(run_script(Path(__file__).parents[1], args, env))
    outputs = [p.communicate(timeout=240)[0] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    chief, other = outputs
    assert "engine=pipeline_multi_worker workers=2 replicas=2" in chief
    assert "model_parallel_degree=2 microbatches=2 stages=[1, 1]" in chief
    assert "[valid] step=2" in chief and "[train]" not in other
    assert digests(chief)[0] == digests(other)[1]  # bit-identical weights on both hosts
    assert (tmp_path / "model-0" / "1").is_dir() and not (tmp_path / "model-1").exists()


def test_every_loop_of_the_step_holds_one_pass_and_one_tick_at_a_time():
    _, trainer = build_pipeline(accumulation=4, microbatches=2)  # two passes of two micro-batches
    step = trainer._step.get_concrete_function(tf.TensorSpec(trainer.batch_shape, tf.int32))
    loops = while_loops(step)
    assert len(loops) >= 3 and all(parallel == 1 for _, parallel in loops), loops  # passes, forward, backward


def test_pipeline_layout_groups_consecutive_devices():
    assert pipeline_layout("GPU", 8, 4) == [[f"/GPU:{i}" for i in range(4)], [f"/GPU:{i}" for i in range(4, 8)]]
    assert pipeline_layout("GPU", 8, 2)[3] == ["/GPU:6", "/GPU:7"]
    assert pipeline_layout("CPU", 2, 2) == [["/CPU:0", "/CPU:1"]]


@pytest.mark.usefixtures("two_logical_cpus")
def test_pipeline_engine_on_this_hosts_devices():
    engine = make_pipeline_engine(
        "auto", model_parallel_degree=2, hosts=["algo-1"], current_host="algo-1", num_gpus=0, env={}
    )
    assert (engine.name, engine.replica_devices, engine.num_replicas, engine.is_chief) == (
        "pipeline",
        [["/CPU:0", "/CPU:1"]],
        1,
        True,
    )
    value = tf.constant([1.0, 2.0])
    assert engine.all_reduce([value], 0, "x") == [value]  # one replica: nothing to sum
    # TensorFlow is running with 2 logical CPUs: it cannot be split into 4 any more.
    with pytest.raises(ValueError, match="model_parallel_degree 4 does not divide this host's 2 logical CPUs"):
        make_pipeline_engine("auto", model_parallel_degree=4, hosts=["a"], current_host="a", num_gpus=0, env={})


def test_pipeline_refuses_the_horovod_engine():
    with pytest.raises(ValueError, match="the Horovod API runs one process per device"):
        make_pipeline_engine("horovod", model_parallel_degree=2, hosts=["a"], current_host="a", num_gpus=8, env={})
