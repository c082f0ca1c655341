"""Training throughput: our GPT against keras-hub's GPT2Backbone of the same shape, same training step.

Both models run through the same ``trainer.Trainer`` step (AdamW, clipping, the same token cross-entropy;
each model computes its loss: keras-hub's as GPT2CausalLM does, logits then TensorFlow's sparse
cross-entropy; ours through ``GPT.loss_sum``) on the same random token batches, in this process, float32
then mixed bfloat16, in alternating rounds (ours, theirs, theirs, ours ...) so that a busy neighbour on
the machine slows both alike. TensorFlow's threads are fixed (``--threads`` per operation, 1 by default; one
operation at a time, as a GPU stream runs them) and, with one thread, kept on one core (``rounds.one_core``, set
before TensorFlow starts them: in 16-round runs the slowest round read 1.206 pinned, 1.177 and 1.194 not), and
the time is the process's CPU time, which a busy neighbour disturbs least. The figure is training tokens per
CPU-second; the ratio is ours / keras-hub, taken round by round (``rounds.py``: ABBA order) and reported as the
median round, with the range.

    .venv/bin/python bench/train_throughput_bench.py [--layers 4 --width 256 --heads 4 --context 128 --batch 8]

Needs keras-hub (bench/requirements.txt, installed with --no-deps next to tensorflow-cpu).
Exits 1 when the median round of some precision is below 1.2x keras-hub.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))

import keras
import keras_hub
import numpy as np
import tensorflow as tf
from gpt.model import GPT
from rounds import Ratio, alternate, one_core, rate_ratio
from run.engines import StrategyEngine
from run.trainer import PRECISIONS, Trainer, make_optimizer

GOAL = 1.2


class KerasHubGPT2(keras.Model):
    """keras-hub's GPT2Backbone with its tied output projection (as GPT2CausalLM computes logits)."""

    def __init__(self, vocab_size: int, sequence_length: int, n_layer: int, d_model: int, n_head: int, dtype=None):
        super().__init__(dtype=dtype)
        self.sequence_length = sequence_length
        self.backbone = keras_hub.models.GPT2Backbone(
            vocabulary_size=vocab_size,
            num_layers=n_layer,
            num_heads=n_head,
            hidden_dim=d_model,
            intermediate_dim=4 * d_model,
            dropout=0.0,
            max_sequence_length=sequence_length,
            dtype=dtype,
        )

    def call(self, token_ids, training=False):
        hidden = self.backbone({"token_ids": token_ids, "padding_mask": tf.ones_like(token_ids)}, training=training)
        return tf.cast(self.backbone.token_embedding(hidden, reverse=True), tf.float32)

    def loss_sum(self, token_ids, targets, training=False):
        """The trainer's loss as keras-hub computes it: logits, then the sparse cross-entropy (GPT2CausalLM)."""
        logits = self(token_ids, training=training)
        return tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits))


def make_trainer(model: keras.Model, batch: int, context: int, precision: str = "fp32") -> Trainer:
    optimizer = make_optimizer(model, 1e-4)
    engine = StrategyEngine(tf.distribute.get_strategy(), "default")
    return Trainer(
        model, optimizer, engine, accumulation_steps=1, micro_batch_size=batch, sequence_length=context,
        precision=precision,
    )  # fmt: skip


def tokens_per_second(trainer: Trainer, batches: list[tf.Tensor]) -> float:
    """Training tokens per CPU-second of this process over ``batches``."""
    start = time.process_time()
    for batch in batches:
        trainer.train_step(batch).wait()
    return len(batches) * trainer.tokens_per_step / (time.process_time() - start)


def compare(shape: dict, precision: str, batches: list[tf.Tensor], rounds: int) -> tuple[Ratio, list, list]:
    """Round-by-round ratio of ours to keras-hub's training tokens/s, and each one's per-round figures."""
    dtype = PRECISIONS[precision]
    ours, theirs = GPT(**shape, dtype=dtype), KerasHubGPT2(**shape, dtype=dtype)
    theirs(tf.zeros([1, shape["sequence_length"]], tf.int32))
    assert ours.count_params() == theirs.count_params(), (ours.count_params(), theirs.count_params())
    micro, context = batches[0].shape[2], shape["sequence_length"]
    mine, reference = (make_trainer(m, micro, context, precision) for m in (ours, theirs))
    for trainer in (mine, reference):  # trace and warm up
        tokens_per_second(trainer, batches[:2])
    rates = alternate(rounds, lambda: tokens_per_second(mine, batches), lambda: tokens_per_second(reference, batches))
    return rate_ratio(*rates), *rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="threads per operation")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=list(PRECISIONS))
    a = parser.parse_args()
    if a.threads > 1:  # several threads per operation need as many cores
        return run(a, "unpinned")
    with one_core() as placement:
        return run(a, placement)


def run(a: argparse.Namespace, placement: str) -> int:
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    keras.utils.set_random_seed(0)
    shape = dict(vocab_size=a.vocab, sequence_length=a.context, n_layer=a.layers, d_model=a.width, n_head=a.heads)
    rng = np.random.default_rng(0)
    batches = [tf.constant(rng.integers(0, a.vocab, [1, 1, a.batch, a.context + 1]), tf.int32) for _ in range(a.steps)]
    print(
        f"shape: {a.layers} layers x {a.width} wide, {a.heads} heads, context {a.context}, vocab {a.vocab}, "
        f"batch {a.batch}; {a.threads} threads per operation {placement}; {a.rounds} alternating rounds of "
        f"{a.steps} steps"
    )
    medians = []
    for precision in a.precisions:
        ratio, mine, reference = compare(shape, precision, batches, a.rounds)
        medians.append(ratio.median)
        print(
            f"{precision}: ours {np.median(mine):,.0f}, keras-hub {np.median(reference):,.0f} training tokens/CPU-s "
            f"(median rounds); ratio ours / keras-hub {ratio} (goal {GOAL})"
        )
    return 0 if min(medians) >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
