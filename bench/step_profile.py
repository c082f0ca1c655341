"""Where a training step's time goes: TensorFlow's profiler over a few steps, operation time by type and by scope.

Ours or keras-hub's GPT2Backbone (``train_throughput_bench.py``'s shapes and trainer), one thread per operation and
one operation at a time, so that the operations' times add up to the step. Scopes are the layers' names with the
block index folded (``BLOCK``) and ``bwd`` for the gradient.

    .venv/bin/python bench/step_profile.py [--model ours|keras-hub] [--precision fp32|bf16] [--top 25]
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse
import collections
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2
from train_throughput_bench import GPT, PRECISIONS, KerasHubGPT2, make_trainer


def operation_times(logdir: str, steps: int) -> list[tuple[str, str, float]]:
    """(scope, type, milliseconds per step) of every operation the profiler saw on the compute threads."""
    space = xplane_pb2.XSpace()
    space.ParseFromString(next(Path(logdir).rglob("*.xplane.pb")).read_bytes())
    out = []
    for plane in space.planes:
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" in name and not name.startswith("ExecutorState"):
                    scope, kind = name.rsplit(":", 1)
                    out.append((scope, kind, event.duration_ps / 1e9 / steps))
    return out


def fold(scope: str) -> str:
    direction = "bwd " if "gradient_tape" in scope else "fwd "
    scope = re.sub(r"_\d+(/|$)", r"\1", scope.replace("StatefulPartitionedCall/", "").replace("gradient_tape/", ""))
    return direction + "/".join(re.sub(r"h\d+/|transformer_layer_\d+/", "BLOCK/", scope).split("/")[:4])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["ours", "keras-hub"], default="ours")
    parser.add_argument("--precision", choices=list(PRECISIONS), default="fp32")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--top", type=int, default=25)
    a = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    shape = dict(vocab_size=8192, sequence_length=128, n_layer=4, d_model=256, n_head=4)
    model = (GPT if a.model == "ours" else KerasHubGPT2)(**shape, dtype=PRECISIONS[a.precision])
    model(tf.zeros([1, 128], tf.int32))
    trainer = make_trainer(model, 8, 128, a.precision)
    batch = tf.constant(np.random.default_rng(0).integers(0, 8192, [1, 1, 8, 129]), tf.int32)
    for _ in range(3):
        trainer.train_step(batch)
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(a.steps):
            trainer.train_step(batch)
        tf.profiler.experimental.stop()
        times = operation_times(logdir, a.steps)
    print(f"{a.model} {a.precision}: {sum(t for *_, t in times):.1f} ms of operations per step (under the profiler)")
    for title, key in (("by type", lambda op: op[1]), ("by scope", lambda op: fold(op[0]))):
        totals = collections.Counter()
        for op in times:
            totals[key(op)] += op[2]
        print(title)
        for name, ms in totals.most_common(a.top):
            print(f"  {ms:8.2f} ms  {name}")


if __name__ == "__main__":
    main()
