"""Exports the XLA HLO of one compiled micro-step of the project's trainer, for ``bench/hlo_run.py``.

The step is ``Trainer._micro_grads`` built with ``use_xla=True`` (``training/run/trainer.py``): the forward and
backward pass of one micro-batch, the part of a training step that the trainer compiles with XLA and where
nearly all its FLOPs are. The optimizer, the all-reduce and the host's finiteness check are not in it. The
HLO is TensorFlow's ``experimental_get_compiler_ir(...)(stage="hlo_serialized")``, before XLA's optimisation
(the device's compiler optimises it); its parameters are the tokens, the replica's dropout stream (0: the trainer
passes ``engine.replica_index()``), then every variable the step reads (the
weights and the loss scale), its results the loss and then the weights' gradients. No weight is written: the
JSON beside the HLO gives each parameter's name, shape and dtype, and the runner makes them from that.
``--values`` also writes every parameter's value (``.npz``) and TensorFlow's loss on them (in the JSON). The JSON
also holds ``infra/estimate/memory.py``'s figure for the compiled step (``compiled_memory_bench.estimate_bytes``).
The HLO is gzipped. Until the causal mask was made from an iota in the step (``gpt/layers.py``'s ``future_mask``)
TensorFlow folded each block's mask into a pred[T, T] constant, twice with recompute (gpt3-125m at T = 2,048: 24
of 4 MiB, a 98 MiB module); the JSON gives the module's size and its largest constant (``largest_constant``).

    .venv/bin/python bench/hlo_export.py --preset gpt3-1.3b --micro-batch 4 --out build/hlo
    .venv/bin/python bench/hlo_export.py --preset tiny --micro-batch 2 --sequence-length 128 --values

Writes ``OUT/NAME.hlo.pb.gz`` and ``OUT/NAME.json`` (NAME: preset-precision-bB-sT, -kept with ``--no-recompute``), with
``--values`` ``OUT/NAME.npz``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "training")]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from compiled_memory_bench import estimate_bytes  # noqa: E402
from contract.presets import flops_per_token, get_preset, load_presets, parameter_count  # noqa: E402
from gpt.model import GPT  # noqa: E402
from run.engines import StrategyEngine  # noqa: E402
from run.trainer import PRECISIONS, Trainer  # noqa: E402
from tensorflow.compiler.xla.service import hlo_pb2  # noqa: E402

PRESETS = tuple(load_presets())


def build_trainer(args: argparse.Namespace) -> Trainer:
    """The project's model and trainer at ``args``' shape, one micro-batch a step, the micro-step compiled; no
    optimizer (the micro-step reads none, and gpt3-1.3b's AdamW slots would be 10.5 GB more here)."""
    tf.keras.utils.set_random_seed(args.seed)
    model = GPT.from_preset(args.preset, vocab_size=args.vocab, sequence_length=args.sequence_length,
                            dtype=PRECISIONS[args.precision], recompute=args.recompute, seed=args.seed)  # fmt: skip
    engine = StrategyEngine(tf.distribute.get_strategy(), "default")
    return Trainer(model, None, engine, accumulation_steps=1, micro_batch_size=args.micro_batch,
                   sequence_length=args.sequence_length, precision=args.precision, use_xla=True)  # fmt: skip


def variables_by_handle(trainer: Trainer) -> dict[int, tf.Variable]:
    """Each TensorFlow variable the micro-step may read (the model's, the loss scale), by its handle's id."""
    variables = [getattr(v, "value", v) for v in trainer.model.variables] + [trainer.loss_scale]
    return {id(v.handle): v for v in variables}


def largest_constant(hlo: bytes) -> int:
    """The elements of the largest constant in a serialized HLO module (0 if it has none)."""
    module = hlo_pb2.HloModuleProto.FromString(hlo)
    instructions = [i for computation in module.computations for i in computation.instructions]
    return max((math.prod(i.shape.dimensions) for i in instructions if i.opcode == "constant"), default=0)


def export(args: argparse.Namespace) -> Path:
    """Writes the HLO and its JSON (and with ``--values`` the inputs and TensorFlow's loss); returns the JSON path."""
    trainer = build_trainer(args)
    rng = np.random.default_rng(args.seed)
    tokens = tf.constant(rng.integers(0, args.vocab, [args.micro_batch, args.sequence_length + 1]), tf.int32)
    step = trainer._micro_grads  # the tf.function the trainer compiles (jit_compile=use_xla)
    stream = tf.constant(0)  # replica 0's dropout stream, an int32 scalar as the trainer passes it
    hlo = step.experimental_get_compiler_ir(tokens, stream)(stage="hlo_serialized")
    known = variables_by_handle(trainer)
    captured = step.get_concrete_function(tokens, stream).captured_inputs
    if unknown := [t for t in captured if id(t) not in known]:
        raise SystemExit(f"the micro-step reads {len(unknown)} variable(s) this exporter does not know: {unknown}")
    variables = [known[id(t)] for t in captured]
    values = [tokens.numpy(), stream.numpy()] + [v.numpy() for v in variables]
    names = ["tokens", "stream"] + [v.name.removesuffix(":0") for v in variables]
    inputs = [{"name": n, "shape": list(a.shape), "dtype": a.dtype.name} for n, a in zip(names, values, strict=True)]
    preset = get_preset(args.preset)
    n_params = parameter_count(preset, vocab_size=args.vocab, sequence_length=args.sequence_length)
    meta = {
        "preset": args.preset, "micro_batch": args.micro_batch, "sequence_length": args.sequence_length,
        "vocab_size": args.vocab, "precision": args.precision, "recompute": args.recompute,
        "tokens_per_step": args.micro_batch * args.sequence_length,
        "model_flops_per_token": flops_per_token(preset, n_params=n_params, sequence_length=args.sequence_length),
        "inputs": inputs, "outputs": "the micro-batch's loss (its share of the step's mean), then each gradient",
        "hlo_bytes": len(hlo), "largest_constant": largest_constant(hlo),
        "memory_estimate_bytes": estimate_bytes((args.preset, args.vocab, args.sequence_length, args.micro_batch,
                                                 args.precision, args.recompute)),
    }  # fmt: skip
    kept = "" if args.recompute else "-kept"
    name = f"{args.preset}-{args.precision}-b{args.micro_batch}-s{args.sequence_length}{kept}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.hlo.pb.gz").write_bytes(gzip.compress(hlo))
    if args.values:
        np.savez(args.out / f"{name}.npz", *values)
        losses = {"xla": step(tokens, stream), "graph": tf.function(trainer._micro_grads_fn)(tokens, stream)}
        meta["tensorflow"] = {kind: {"loss": float(loss), "grad_norm": float(tf.linalg.global_norm(grads))}
                              for kind, (loss, grads) in losses.items()}  # fmt: skip
    path = args.out / f"{name}.json"
    path.write_text(json.dumps(meta, indent=1) + "\n")
    return path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=PRESETS, required=True)
    parser.add_argument("--micro-batch", type=int, default=4, help="sequences (prod's micro_batch_size: 4)")
    parser.add_argument("--sequence-length", type=int, default=2048)
    parser.add_argument("--vocab", type=int, default=50257, help="token ids (GPT-2's 50,257)")
    parser.add_argument("--precision", choices=PRECISIONS, default="bf16")
    parser.add_argument("--no-recompute", dest="recompute", action="store_false", help="keep block activations")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--values", action="store_true", help="also the inputs' values and TensorFlow's loss")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "hlo")
    return parser.parse_args(argv)


if __name__ == "__main__":
    print(export(parse_args()))
