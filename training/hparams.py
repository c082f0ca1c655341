"""Hyperparameters: command-line arguments, SageMaker's ``SM_HPS``, and the SageMaker paths.

SageMaker passes every hyperparameter twice: as ``--name value`` arguments and as the JSON object
``SM_HPS``. Values are strings on the wire: booleans arrive as "True"/"False" (``type=bool`` would read
"False" as True) and the Python SDK JSON-encodes strings, so one may arrive as ``"\\"gpt3-125m\\""``.
Both are decoded here; command-line arguments win over ``SM_HPS``. Unknown names (e.g. the
``model_dir`` S3 URI that the TensorFlow estimator adds) are reported and ignored.

``python train.py --help`` lists every hyperparameter with its default.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def str2bool(value: str | bool) -> bool:
    """ "True"/"False" (any case), "1"/"0", "yes"/"no" -> bool."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().strip('"').lower()
    if text in ("true", "1", "yes", "y", "on"):
        return True
    if text in ("false", "0", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean (True/False), got {value!r}")


def build_parser(env=os.environ) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="train.py",
        description="Pre-train a GPT decoder on token shards (SageMaker script mode or local).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = p.add_argument
    # Model
    add("--model_preset", default="gpt3-125m", help="row of gpt/presets.json: tiny, small, gpt3-125m ... gpt3-13b")
    add("--sequence_length", type=int, default=0, help="context in tokens; 0 = the dataset's sequence length")
    add("--vocab_size", type=int, default=0, help="embedding rows; 0 = the tokenizer's vocabulary (larger pads)")
    add("--dropout", type=float, default=0.0, help="dropout rate in embeddings and blocks")
    add("--precision", choices=["fp32", "bf16", "fp16"], default="fp32", help="fp16 uses dynamic loss scaling")
    add("--use_xla", type=str2bool, default=False, help="XLA-compile each micro-batch's forward and backward pass")
    add("--recompute", type=str2bool, default=False, help="recompute block activations in the backward pass")
    # Batch and schedule
    add(
        "--global_batch_tokens",
        type=int,
        default=0,
        help="tokens per optimizer step over all replicas, reached "
        "with gradient accumulation; 0 = one micro-batch per replica (grows with the replica count)",
    )
    add("--micro_batch_size", type=int, default=8, help="sequences per replica per forward pass")
    add("--max_steps", type=int, default=1000, help="optimizer steps to train for (the run's end)")
    add("--learning_rate", type=float, default=6e-4, help="peak learning rate at lr_reference_tokens a step")
    add(
        "--lr_reference_tokens",
        type=int,
        default=524_288,
        help="global batch (tokens) that learning_rate is "
        "tuned for; the peak scales linearly with global_batch_tokens / this; 0 = no scaling",
    )
    add("--warmup_steps", type=int, default=100, help="steps of linear warm-up")
    add("--min_lr_ratio", type=float, default=0.1, help="cosine decay floor as a fraction of the peak")
    add("--weight_decay", type=float, default=0.1, help="AdamW decoupled weight decay (matrices only)")
    add("--adam_beta1", type=float, default=0.9, help="AdamW beta_1")
    add("--adam_beta2", type=float, default=0.95, help="AdamW beta_2")
    add("--grad_clip", type=float, default=1.0, help="clip the global gradient norm to this; 0 = off")
    add("--initial_loss_scale", type=float, default=2.0**15, help="fp16 only: starting dynamic loss scale")
    add("--seed", type=int, default=1234, help="weights, dropout and data order")
    add("--deterministic", type=str2bool, default=False, help="TF op determinism (bit-identical reruns, slower)")
    add("--shuffle_buffer", type=int, default=1024, help="records shuffled together in the global data order")
    # Distribution
    add(
        "--engine",
        choices=["auto", "mirrored", "multi_worker", "horovod"],
        default="auto",
        help="auto: Horovod "
        "API if importable and launched by MPI, else multi_worker with TF_CONFIG or several hosts, else one worker",
    )
    add(
        "--model_parallel_degree",
        type=int,
        default=1,
        help="pipeline stages per model replica (K): each replica's blocks are split over K devices of a host, "
        "the host's other devices and the other hosts are data-parallel replicas; 1 = no pipeline",
    )
    add(
        "--microbatches",
        type=int,
        default=0,
        help="pipeline only: micro-batches per GPipe pass (M), a divisor of the step's accumulation steps; "
        "0 = all of them; with global_batch_tokens 0, the step's micro-batches per replica",
    )
    add("--cpu_threads", type=int, default=0, help="TensorFlow intra-op threads; 0 = TensorFlow's choice")
    # Checkpoints, evaluation, logs
    add("--checkpoint_dir", default="/opt/ml/checkpoints", help="checkpoints (SageMaker syncs it with S3)")
    add("--checkpoint_every", type=int, default=500, help="save every N steps (and at the end); 0 = end only")
    add("--keep_checkpoints", type=int, default=3, help="newest checkpoints kept")
    add("--async_checkpoint", type=str2bool, default=True, help="write checkpoints in the background")
    add("--eval_every", type=int, default=500, help="validation every N steps (and at the end); 0 = never")
    add("--eval_batches", type=int, default=20, help="validation batches per evaluation (per replica)")
    add("--log_every", type=int, default=10, help="a [train] line every N steps")
    add("--peak_tflops", type=float, default=0.0, help="peak TFLOPS per device for mfu; 0 = look up the GPU")
    add("--sample_tokens", type=int, default=64, help="tokens of the [sample] generated at the end; 0 = none")
    add("--sample_prompt", default="", help="prompt of the sample; empty = start after <|endoftext|>")
    add("--sample_temperature", type=float, default=0.8, help="0 = greedy")
    # Paths (SageMaker's environment)
    add("--train_dir", default=env.get("SM_CHANNEL_TRAIN"), help="train channel (SM_CHANNEL_TRAIN)")
    add(
        "--validation_dir",
        default=env.get("SM_CHANNEL_VALIDATION"),
        help="validation channel "
        "(SM_CHANNEL_VALIDATION); unset = the train channel's dataset, whose validation/ split is used",
    )
    add("--export_dir", default=env.get("SM_MODEL_DIR", "/opt/ml/model"), help="SavedModel + tokenizer (SM_MODEL_DIR)")
    add("--output_dir", default=env.get("SM_OUTPUT_DIR", "/opt/ml/output"), help="failure file (SM_OUTPUT_DIR)")
    return p


def _decode(value) -> str:
    """A SM_HPS value as a command-line string: JSON-encoded strings are unwrapped, booleans spelled True/False."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        value = decoded if isinstance(decoded, str | int | float | bool) else value
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def sm_hps_argv(env=os.environ) -> list[str]:
    """``SM_HPS`` as ``["--name", "value", ...]``."""
    hps = json.loads(env.get("SM_HPS") or "{}")
    argv: list[str] = []
    for name, value in hps.items():
        argv += [f"--{name}", _decode(value)]
    return argv


def parse_args(argv: list[str] | None = None, env=os.environ) -> argparse.Namespace:
    """SM_HPS first, then the command line (which wins); values that look JSON-encoded are decoded."""
    argv = sys.argv[1:] if argv is None else argv
    cli = []
    for item in argv:  # the toolkit quotes nothing, but the SDK may have JSON-encoded a string value
        cli.append(_decode(item) if not item.startswith("--") else item)
    args, unknown = build_parser(env).parse_known_args(sm_hps_argv(env) + cli)
    args.ignored = [item for item in unknown if item.startswith("--")]
    return args
