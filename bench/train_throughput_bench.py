"""Training throughput: our GPT against keras-hub's GPT2Backbone of the same shape, same training step.

Both models run through the same ``trainer.Trainer`` step (AdamW, clipping, the same loss) on the same
random token batches, in this process, in alternating rounds (ours, theirs, ours, theirs ...) so that a
busy neighbour on the machine slows both alike. The figure is training tokens per second; the ratio is
ours / keras-hub (best round of each).

    .venv/bin/python bench/train_throughput_bench.py [--layers 4 --width 256 --heads 4 --context 128 --batch 8]

Needs keras-hub (bench/requirements.txt, installed with --no-deps next to tensorflow-cpu).
Exits 1 when ours is slower than keras-hub by more than the noise margin (3%).
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
from engines import StrategyEngine
from gpt.model import GPT
from trainer import Trainer, make_optimizer

NOISE_MARGIN = 0.03


class KerasHubGPT2(keras.Model):
    """keras-hub's GPT2Backbone with its tied output projection (as GPT2CausalLM computes logits)."""

    def __init__(self, vocab_size: int, sequence_length: int, n_layer: int, d_model: int, n_head: int):
        super().__init__()
        self.sequence_length = sequence_length
        self.backbone = keras_hub.models.GPT2Backbone(
            vocabulary_size=vocab_size,
            num_layers=n_layer,
            num_heads=n_head,
            hidden_dim=d_model,
            intermediate_dim=4 * d_model,
            dropout=0.0,
            max_sequence_length=sequence_length,
        )

    def call(self, token_ids, training=False):
        hidden = self.backbone({"token_ids": token_ids, "padding_mask": tf.ones_like(token_ids)}, training=training)
        return tf.cast(self.backbone.token_embedding(hidden, reverse=True), tf.float32)

    def loss_sum(self, token_ids, targets, training=False):
        """The trainer's loss as keras-hub computes it: logits, then the sparse cross-entropy (GPT2CausalLM)."""
        logits = self(token_ids, training=training)
        return tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits))


def make_trainer(model: keras.Model, batch: int, context: int) -> Trainer:
    optimizer = make_optimizer(model, 1e-4)
    engine = StrategyEngine(tf.distribute.get_strategy(), "default")
    return Trainer(model, optimizer, engine, accumulation_steps=1, micro_batch_size=batch, sequence_length=context)


def tokens_per_second(trainer: Trainer, batches: list[tf.Tensor]) -> float:
    start = time.perf_counter()
    for batch in batches:
        trainer.train_step(batch)
    return len(batches) * trainer.tokens_per_step / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    a = parser.parse_args()

    keras.utils.set_random_seed(0)
    shape = dict(vocab_size=a.vocab, sequence_length=a.context, n_layer=a.layers, d_model=a.width, n_head=a.heads)
    ours, theirs = GPT(**shape), KerasHubGPT2(**shape)
    theirs(tf.zeros([1, a.context], tf.int32))
    assert ours.count_params() == theirs.count_params(), (ours.count_params(), theirs.count_params())
    trainers = {"ours": make_trainer(ours, a.batch, a.context), "keras-hub": make_trainer(theirs, a.batch, a.context)}

    rng = np.random.default_rng(0)
    batches = [tf.constant(rng.integers(0, a.vocab, [1, 1, a.batch, a.context + 1]), tf.int32) for _ in range(a.steps)]
    for trainer in trainers.values():  # trace and warm up
        tokens_per_second(trainer, batches[:2])
    best = dict.fromkeys(trainers, 0.0)
    for _ in range(a.rounds):
        for name, trainer in trainers.items():
            best[name] = max(best[name], tokens_per_second(trainer, batches))

    ratio = best["ours"] / best["keras-hub"]
    print(
        f"shape: {a.layers} layers x {a.width} wide, {a.heads} heads, context {a.context}, vocab {a.vocab}, "
        f"batch {a.batch}: {ours.count_params():,} parameters each; {a.rounds} rounds of {a.steps} steps"
    )
    for name, value in best.items():
        print(f"{name:>10}: {value:,.0f} training tokens/s (best round)")
    print(f"ratio ours / keras-hub: {ratio:.3f}")
    return 0 if ratio >= 1.0 - NOISE_MARGIN else 1


if __name__ == "__main__":
    sys.exit(main())
