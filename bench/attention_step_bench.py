"""The training step before and after issue 37's attention core, on this CPU, in one process.

Two copies of the same small GPT (same weights, same batches), trained by the project's ``Trainer`` (AdamW,
clipping, 2 micro-batches per step, mixed bf16): "before" traced with the autodiff attention it replaced
(float32 scores, an added mask, a float32 softmax and its bf16 copy: ``gpt/layers_test.py``'s
``autodiff_attention``), "after" with ``gpt.layers.causal_attention`` (the custom-gradient core). Each is traced
once, so the core a step runs is the one it was traced with. Steps are timed in CPU seconds (what a busy
neighbour disturbs least) in alternating rounds (``rounds.py``), one TensorFlow thread, operations one at a time;
the figure is after / before in tokens per CPU-second, the median round. Without XLA, as a pipeline runs and as
the CPU path does; a GPU's XLA step is the HLO runner's (``hlo_run.py``).

    .venv/bin/python bench/attention_step_bench.py [--context 512 --rounds 8 --steps 3]
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "training"), str(ROOT / "training" / "gpt"), str(ROOT / "bench")]

from rounds import alternate, one_core, rate_ratio  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    with one_core() as where:
        import keras
        import numpy as np
        import tensorflow as tf

        tf.config.threading.set_inter_op_parallelism_threads(1)
        tf.config.threading.set_intra_op_parallelism_threads(1)
        from gpt import layers
        from gpt.model import GPT
        from layers_test import autodiff_attention
        from run.engines import StrategyEngine
        from run.trainer import Trainer, make_optimizer

        vocab, accumulation = 4096, 2
        engine = StrategyEngine(tf.distribute.get_strategy(), "default")
        rng = np.random.default_rng(0)
        shape = (1, accumulation, args.micro_batch, args.context + 1)
        batches = [tf.constant(rng.integers(0, vocab, shape), tf.int32) for _ in range(args.steps)]

        def trainer(core) -> Trainer:
            keras.utils.set_random_seed(7)
            model = GPT.from_preset("small", vocab_size=vocab, sequence_length=args.context, dtype="mixed_bfloat16")
            trained = Trainer(
                model, make_optimizer(model, 1e-4), engine, accumulation_steps=accumulation,
                micro_batch_size=args.micro_batch, sequence_length=args.context, precision="bf16",
            )  # fmt: skip
            kept, layers.causal_attention = layers.causal_attention, core
            try:
                trained.train_step(batches[0])  # traced with ``core``
            finally:
                layers.causal_attention = kept
            return trained

        before, after = trainer(autodiff_attention), trainer(layers.causal_attention)
        tokens = args.steps * accumulation * args.micro_batch * args.context

        def rate(trained: Trainer):
            def measure() -> float:
                start = time.process_time()
                for batch in batches:
                    trained.train_step(batch)
                return tokens / (time.process_time() - start)

            return measure

        after_rates, before_rates = alternate(args.rounds, rate(after), rate(before))
    print(f"small GPT, context {args.context}, micro-batch {args.micro_batch} x {accumulation}, bf16, {where}")
    print(f"before (autodiff attention)  {np.median(before_rates):8.0f} tokens per CPU-second (median round)")
    print(f"after  (causal_attention)    {np.median(after_rates):8.0f} tokens per CPU-second (median round)")
    print(f"after / before               {rate_ratio(after_rates, before_rates)}")


if __name__ == "__main__":
    main()
