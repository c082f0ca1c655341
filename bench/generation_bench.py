"""Generation throughput: the key/value-cached decoding loop against the same loop without the cache.

Both are ``gpt.generate`` compiled with ``tf.function`` (the loop is a ``tf.while_loop`` in the graph, as in
the exported serving signature), greedy, on the same model and prompt, in this process, in alternating
rounds so that a busy neighbour slows both alike. Without the cache every new token is a forward pass
over the whole sequence so far; with it, one pass over the prompt and then one single-token step per new
token. A third loop runs the cached one on the same model with 4x the context (a cache 4x as
large): a step reads only the positions written, so its speed should not change. Threads are pinned
(``--threads`` per operation, one operation at a time) and the time is the process's CPU time; a cached
loop's measurement is ``--cached_calls`` calls, about as long as one uncached call. The figure is generated
tokens per CPU-second; the ratio is cached / uncached, compared round by round (``rounds.py``: the loops
run back to back in alternating order, and the median round counts).

    .venv/bin/python bench/generation_bench.py [--preset small --context 512 --prompt 16 --new 256 --batch 1]

Exits 1 when the loops generate different tokens, the cached one is not 10x the uncached one, or the
4x larger cache costs more than 10% speed.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import keras
import numpy as np
import tensorflow as tf
from gpt.generate import generate
from gpt.model import GPT
from rounds import alternate, rate_ratio

GOAL = 10.0
CACHE_SIZE_TOLERANCE = 0.10
LARGER = 4  # the third loop's context, in multiples of --context


def tokens_per_second(loop, prompt: tf.Tensor, new_tokens: int, calls: int = 1) -> tuple[float, np.ndarray]:
    """Generated tokens per CPU-second of this process over ``calls`` calls, and the tokens (of the last)."""
    start = time.process_time()
    for _ in range(calls):
        ids = loop(prompt, tf.constant(new_tokens)).numpy()
    return calls * ids.size / (time.process_time() - start), ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--context", type=int, default=512, help="the model's sequence_length (the cache's size)")
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    parser.add_argument("--new", type=int, default=256, help="tokens generated per call")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--cached_calls", type=int, default=8, help="calls of a cached loop per measurement")
    parser.add_argument("--threads", type=int, default=1, help="threads per operation")
    a = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    if a.prompt + a.new > a.context:
        parser.error("prompt + new tokens must fit the context, or the cached loop falls back to the uncached one")

    keras.utils.set_random_seed(0)
    model = GPT.from_preset(a.preset, vocab_size=a.vocab, sequence_length=a.context)
    longer = GPT.from_preset(a.preset, vocab_size=a.vocab, sequence_length=LARGER * a.context)
    for short, long in zip(model.weights, longer.weights, strict=True):  # the same weights and first positions
        long.assign(short if short.shape == long.shape else np.concatenate([short.numpy()] * LARGER))
    prompt = tf.constant(np.random.default_rng(0).integers(0, a.vocab, [a.batch, a.prompt]), tf.int32)
    greedy = (tf.constant(0.0), tf.constant(0))
    larger = f"cache, context {LARGER * a.context}"
    loops = {
        "cache": tf.function(lambda p, n: generate(model, p, n, *greedy, use_cache=True)),
        "no cache": tf.function(lambda p, n: generate(model, p, n, *greedy, use_cache=False)),
        larger: tf.function(lambda p, n: generate(longer, p, n, *greedy, use_cache=True)),
    }
    for loop in loops.values():  # trace and warm up
        tokens_per_second(loop, prompt, 4)
    outputs: dict[str, list[np.ndarray]] = {name: [] for name in loops}

    def measure(name: str):
        # A cached loop is called as often as makes its measurement last about as long as the uncached one's
        # (--cached_calls), so that the two rates in a round are taken over comparable stretches of time.
        calls = 1 if name == "no cache" else a.cached_calls

        def speed() -> float:
            value, ids = tokens_per_second(loops[name], prompt, a.new, calls)
            outputs[name].append(ids)
            return value

        return speed

    speeds = dict(zip(loops, alternate(a.rounds, *map(measure, loops)), strict=True))
    same = all(np.array_equal(ids, outputs["no cache"][0]) for runs in outputs.values() for ids in runs)
    ratio = rate_ratio(speeds["cache"], speeds["no cache"])
    size_ratio = rate_ratio(speeds[larger], speeds["cache"])
    print(
        f"{a.preset}: {model.count_params():,} parameters, context {a.context}, vocab {a.vocab}; "
        f"batch {a.batch}, prompt {a.prompt} tokens, {a.new} new tokens, greedy; {a.rounds} alternating rounds"
    )
    for name, values in speeds.items():
        print(f"{name:>20}: {statistics.median(values):,.1f} generated tokens/CPU-s (median)")
    print(f"ratio cache / no cache: {ratio} (goal {GOAL:.0f}); identical tokens: {same}")
    print(f"{larger} / cache: {size_ratio} (goal >= {1 - CACHE_SIZE_TOLERANCE})")
    return 0 if same and ratio.median >= GOAL and size_ratio.median >= 1 - CACHE_SIZE_TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
