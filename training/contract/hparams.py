"""Hyperparameters: the one schema (``SCHEMA``), train.py's parser built from it, and the check the Plan step runs.

SageMaker passes every hyperparameter twice: as ``--name value`` arguments and as the JSON object
``SM_HPS``. Values are strings on the wire: booleans arrive as "True"/"False" (``type=bool`` would read
"False" as True) and the Python SDK JSON-encodes strings, so one may arrive as ``"\\"gpt3-125m\\""``.
Both are decoded here; command-line arguments win over ``SM_HPS``. An unknown name or an abbreviation is
an error; only the names SageMaker adds itself (``sagemaker_*``, and ``model_dir`` from the TensorFlow
estimator) are set aside.

Standard library only: infra loads this file (``infra/training_code.py``) so that the workflow's Plan step
checks an execution's hyperparameters with this very schema (``check_hyperparameters``) before any job.
``python train.py --help`` lists every hyperparameter with its default.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

RESERVED_PREFIX, RESERVED_NAMES = "sagemaker_", ("model_dir",)  # added by SageMaker, not train.py's
SHOWN_CHARS = 120  # of a value in an error message (a Step Functions Cause holds 32,768 characters)


def shown(value: Any) -> str:
    """``repr(value)`` for an error message, at most about SHOWN_CHARS characters: a 200 KB value is not repeated,
    and an integer too long for ``repr`` (over 4,300 digits) is described instead."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1000:
        return f"<an integer of about {round(value.bit_length() * math.log10(2)):,} digits>"
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text):,} characters)"


class HyperparameterError(ValueError):
    """A hyperparameter that train.py would refuse: its name, its value and what is expected."""

    def __init__(self, name: str, value: Any, expected: str):
        super().__init__(f"{name}: {shown(value)} is not valid; expected {expected}")
        self.name, self.value, self.expected = name, value, expected


def str2bool(value: str | bool) -> bool:
    """ "True"/"False" (any case), "1"/"0", "yes"/"no" -> bool."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().strip('"').lower()
    if text in ("true", "1", "yes", "y", "on"):
        return True
    if text in ("false", "0", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError("a boolean (True/False)")


@dataclasses.dataclass(frozen=True)
class Kind:
    """How a value is read from its command-line string, and the range it must be in."""

    parse: Callable[[str], Any]
    expected: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    open_low: bool = False  # low itself is out of the range
    open_high: bool = False

    def __call__(self, text: str) -> Any:
        try:
            value = self.parse(text)
        except (ValueError, argparse.ArgumentTypeError):
            raise argparse.ArgumentTypeError(self.expected) from None
        if isinstance(value, float) and not math.isfinite(value):  # NaN passes every comparison below
            raise argparse.ArgumentTypeError(self.expected)
        if self.low is not None and (value <= self.low if self.open_low else value < self.low):
            raise argparse.ArgumentTypeError(self.expected)
        if self.high is not None and (value >= self.high if self.open_high else value > self.high):
            raise argparse.ArgumentTypeError(self.expected)
        if self.choices and value not in self.choices:
            raise argparse.ArgumentTypeError(self.expected)
        return value


def integer(low: int, high: int) -> Kind:
    return Kind(_integer, f"an integer from {low:,} to {high:,}", low, high)


def number(low: float, high: float, *, open_low: bool = False, open_high: bool = False) -> Kind:
    """A float in a range whose ends are each included or not (``open_low``: ``low`` itself is refused)."""
    above = f"greater than {low:g}" if open_low else f"at least {low:g}"
    below = f"less than {high:g}" if open_high else f"at most {high:g}"
    return Kind(float, f"a finite number {above} and {below}", low, high, open_low=open_low, open_high=open_high)


def one_of(*choices: str) -> Kind:
    return Kind(str, f"one of {', '.join(choices)}", choices=choices)


def _integer(text: str) -> int:
    if len(text) > 30:  # int() of 4,300 digits and more raises; no hyperparameter needs 30
        raise ValueError(text)
    return int(text)


def _text(text: str) -> str:
    """A string that cannot be read as an option: ``--sample_prompt --export_dir=/x`` would be two."""
    if text.startswith("-"):
        raise ValueError(text)
    return text


# What each block recomputes in the backward pass instead of keeping (gpt/layers.py; infra/estimate's memory and
# step-time models use these names): nothing, the attention sublayer, the MLP, or the whole block.
RECOMPUTE_MODES = ("none", "attention", "mlp", "full")


def recompute_mode(value: str | bool) -> str:
    """A recompute mode from a name or a boolean (earlier runs' recompute): true -> ``full``, false -> ``none``.

    Example:
        >>> recompute_mode("True"), recompute_mode(False), recompute_mode("mlp")
        ('full', 'none', 'mlp')
    """
    text = value if isinstance(value, bool) else str(value).strip().strip('"').lower()
    if text in RECOMPUTE_MODES:
        return text
    try:
        return "full" if str2bool(text) else "none"
    except argparse.ArgumentTypeError:
        expected = ", ".join(RECOMPUTE_MODES)
        raise ValueError(f"recompute: {shown(value)} is not valid; expected one of {expected}") from None


SOURCE_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")  # a source of a mix (the Plan step checks the same)
SOURCE_NAME_RULE = "of a-z, 0-9 and '-' (at most 32, not se or se-...)"  # is_source_name, in words


def is_source_name(name: str) -> bool:
    """A ``SOURCE_NAME`` other than ``se`` and ``se-...`` (``val_bpb_se_<name>`` would read as another metric)."""
    return bool(SOURCE_NAME.fullmatch(name)) and name != "se" and not name.startswith("se-")


MIX_PERIOD = 1 << 16  # slots of the mix's layout (data/source_mix.py): a share below 1 / MIX_PERIOD gets none


def metric_key(source: str) -> str:
    """A source's name as it ends a metric's key in the log lines: ``web-2`` -> ``web_2``."""
    return source.replace("-", "_")


def source_weights(text: str) -> dict[str, float]:
    """``source_weights`` as {name: weight}, names sorted; "" = no mix. Names are ``is_source_name`` each once;
    weights positive finite.

    Example:
        >>> source_weights("web=0.7,code=0.3")
        {'code': 0.3, 'web': 0.7}
    """
    weights: dict[str, float] = {}
    for pair in filter(None, (p.strip() for p in text.strip().strip('"').split(","))):
        name, _, weight = (part.strip() for part in pair.partition("="))
        value = float(weight)  # ValueError for a missing or non-numeric weight
        if not is_source_name(name) or name in weights:
            raise ValueError(name)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(weight)
        weights[name] = value
    return dict(sorted(weights.items()))


def _source_weights_text(text: str) -> str:
    source_weights(text)
    return text


def xla_setting(value: str | bool) -> str | bool:
    """``use_xla``: "auto" or a boolean (``run/parallelism.py``'s ``use_xla`` decides auto)."""
    text = value if isinstance(value, bool) else str(value).strip().strip('"').lower()
    return "auto" if text == "auto" else str2bool(text)


BOOLEAN = Kind(str2bool, "a boolean (True/False)")
XLA = Kind(xla_setting, "auto or a boolean (True/False)")
RECOMPUTE = Kind(recompute_mode, f"one of {', '.join(RECOMPUTE_MODES)} (true = full, false = none)")
TEXT = Kind(_text, "a string that does not start with '-'")
SOURCE_WEIGHTS = Kind(
    _source_weights_text,
    f"name=weight pairs separated by commas, e.g. web=0.7,code=0.3: each name once, {SOURCE_NAME_RULE}, each "
    "weight a positive finite number",
)
# A folder in SageMaker's container: SageMaker and the workflow choose these, an execution's input may not.
PATH = Kind(_text, "a path")
BIG = 10**12  # steps and step counts: no run comes near


@dataclasses.dataclass(frozen=True)
class Hyperparameter:
    """One of train.py's hyperparameters. ``env``: the SageMaker variable its default is read from."""

    name: str
    kind: Kind
    default: Any
    help: str
    env: str | None = None


H = Hyperparameter
SCHEMA: tuple[Hyperparameter, ...] = (
    # Model
    H("model_preset", TEXT, "gpt3-125m", "row of contract/presets.json: tiny, small, gpt3-125m ... gpt3-13b"),
    H("n_layer", integer(0, 256), 0, "blocks; 0 = the preset's"),
    H("d_model", integer(0, 65_536), 0, "model width; 0 = the preset's"),
    H("n_head", integer(0, 1_024), 0, "attention heads (dividing d_model); 0 = the preset's"),
    H("sequence_length", integer(0, 1_048_576), 0, "context in tokens; 0 = the dataset's sequence length"),
    H("vocab_size", integer(0, 2**32), 0, "embedding rows; 0 = the tokenizer's vocabulary (larger pads)"),
    H("dropout", number(0.0, 1.0, open_high=True), 0.0, "dropout rate in embeddings and blocks (1 keeps nothing)"),
    H("precision", one_of("fp32", "bf16", "fp16"), "fp32", "fp16 uses dynamic loss scaling"),
    H(
        "use_xla",
        XLA,
        "auto",
        "XLA-compile each data-parallel micro-batch's forward and backward pass; auto = on where GPUs are visible "
        "(off for a pipeline)",
    ),
    H(
        "recompute",
        RECOMPUTE,
        "none",
        "what each block recomputes in the backward pass instead of keeping: none, attention, mlp or full",
    ),
    # Batch and schedule (the recipe: recipe.py)
    H(
        "global_batch_tokens",
        integer(0, 2**30),
        0,
        "tokens per optimizer step over all replicas, reached with gradient accumulation; 0 = one micro-batch "
        "per replica (grows with the replica count)",
    ),
    H("micro_batch_size", integer(1, 4_096), 8, "sequences per replica per forward pass"),
    H("max_steps", integer(1, BIG), 1000, "optimizer steps to train for (the run's end)"),
    H(
        "learning_rate",
        number(0.0, 1.0, open_low=True),
        None,
        "peak learning rate (0 trains nothing); unset = the preset's (GPT-3 Table 2.1)",
    ),
    H(
        "lr_reference_tokens",
        integer(0, 2**30),
        0,
        "scale the peak by global batch / this (linear scaling rule); 0 = no scaling",
    ),
    H(
        "warmup_steps",
        integer(0, BIG),
        None,
        "steps of linear warm-up; unset = the preset's warm-up tokens / global batch",
    ),
    H(
        "decay_steps",
        integer(1, BIG),
        None,
        "step where the cosine reaches its floor; unset = the preset's decay tokens / global batch, at most max_steps",
    ),
    H("min_lr_ratio", number(0.0, 1.0), 0.1, "cosine decay floor as a fraction of the peak"),
    H("weight_decay", number(0.0, 1.0), 0.1, "AdamW decoupled weight decay (matrices only)"),
    # Below 1 (Keras' Adam): beta_1 = 1 divides the step by 1 - beta_1^t = 0 (NaN weights after one step), beta_2 = 1
    # multiplies it by sqrt(1 - beta_2^t) = 0 (nothing trains).
    H("adam_beta1", number(0.0, 1.0, open_high=True), 0.9, "AdamW beta_1"),
    H("adam_beta2", number(0.0, 1.0, open_high=True), 0.95, "AdamW beta_2"),
    H("grad_clip", number(0.0, 1e6), 1.0, "clip the global gradient norm to this; 0 = off"),
    H("initial_loss_scale", number(1.0, 2.0**32), 2.0**15, "fp16 only: starting dynamic loss scale"),
    H("seed", integer(0, 2**31 - 1), 1234, "weights, dropout and data order"),
    H("deterministic", BOOLEAN, False, "TF op determinism (bit-identical reruns, slower)"),
    H(
        "data_order",
        one_of("permutation", "blocks"),
        "permutation",
        "each epoch a full random permutation of the sequences, or 64-record blocks permuted and shuffled in windows "
        "of shuffle_buffer (data/sequence_order.py)",
    ),
    H(
        "source_weights",
        SOURCE_WEIGHTS,
        "",
        "a mix of the train split's sources, e.g. web=0.7,code=0.3 (normalised; every source of the split named): "
        'each source read in its share of the sequences (data/source_mix.py); "" = every record in its share',
    ),
    H(
        "shuffle_buffer",
        integer(1, 65_536),
        1024,
        "data_order=blocks: records shuffled together (data/sequence_order.py)",
    ),
    # Distribution
    H(
        "engine",
        one_of("auto", "mirrored", "multi_worker", "horovod"),
        "auto",
        "auto: Horovod API if importable and launched by MPI, else multi_worker with TF_CONFIG or several hosts, "
        "else one worker",
    ),
    H(
        "model_parallel_degree",
        integer(1, 64),
        1,
        "pipeline stages per model replica (K): each replica's blocks are split over K devices of a host, the "
        "host's other devices and the other hosts are data-parallel replicas; 1 = no pipeline",
    ),
    H(
        "microbatches",
        integer(0, BIG),
        0,
        "pipeline only: micro-batches per GPipe pass (M), a divisor of the step's accumulation steps; 0 = all of "
        "them; with global_batch_tokens 0, the step's micro-batches per replica",
    ),
    H("cpu_threads", integer(0, 1_024), 0, "TensorFlow intra-op threads; 0 = TensorFlow's choice"),
    # Checkpoints, evaluation, logs
    H("checkpoint_dir", PATH, "/opt/ml/checkpoints", "checkpoints (SageMaker syncs it with S3)"),
    H("checkpoint_every", integer(0, BIG), 500, "save every N steps (and at the end); 0 = end only"),
    H("keep_checkpoints", integer(1, 100), 3, "newest checkpoints kept"),
    H("async_checkpoint", BOOLEAN, True, "write checkpoints in the background"),
    H("eval_every", integer(0, BIG), 500, "validation every N steps (and at the end); 0 = never"),
    H(
        "eval_batches",
        integer(1, 10_000),
        20,
        "validation batches per evaluation (per replica), of a fixed sample spread over the whole split",
    ),
    H("log_every", integer(1, BIG), 10, "a [train] line every N steps"),
    H("peak_tflops", number(0.0, 1e5), 0.0, "peak TFLOPS per device for mfu; 0 = look up the GPU"),
    # Training health (observe/observer.py): TensorBoard, the profiler window, the rules' thresholds
    H(
        "tensorboard_dir",
        PATH,
        "",
        "TensorBoard logs and the training report (the workflow sets TensorBoardOutputConfig's LocalPath, "
        "/opt/ml/output/tensorboard); empty = neither, the verdicts are still printed",
    ),
    H("profile_start", integer(0, BIG), 20, "first step of the TensorFlow profiler trace"),
    H("profile_steps", integer(0, 1_000), 5, "steps the profiler traces; 0 = no trace"),
    H("health_rules", TEXT, "{}", "JSON of health-rule thresholds (health.HealthRules); {} = the defaults"),
    H("sample_tokens", integer(0, 4_096), 64, "tokens of the [sample] generated at the end; 0 = none"),
    H("sample_prompt", TEXT, "", "prompt of the sample; empty = start after <|endoftext|>"),
    H("sample_temperature", number(0.0, 100.0), 0.8, "0 = greedy"),
    # Paths (SageMaker's environment)
    H("train_dir", PATH, None, "train channel (SM_CHANNEL_TRAIN)", env="SM_CHANNEL_TRAIN"),
    H(
        "validation_dir",
        PATH,
        None,
        "validation channel (SM_CHANNEL_VALIDATION); unset = the train channel's dataset, whose validation/ split "
        "is used",
        env="SM_CHANNEL_VALIDATION",
    ),
    H("export_dir", PATH, "/opt/ml/model", "SavedModel + tokenizer (SM_MODEL_DIR)", env="SM_MODEL_DIR"),
    H(
        "hf_checkpoint",
        BOOLEAN,
        True,
        "also write a Hugging Face GPT-2 checkpoint (config.json, model.safetensors, tokenizer) in <export_dir>/hf",
    ),
    H("output_dir", PATH, "/opt/ml/output", "failure file (SM_OUTPUT_DIR)", env="SM_OUTPUT_DIR"),
)
BY_NAME = {h.name: h for h in SCHEMA}
PATHS = tuple(h.name for h in SCHEMA if h.kind is PATH)


def is_reserved(name: str) -> bool:
    """Names SageMaker itself adds (``sagemaker_program``, ``model_dir`` ...): set aside, not train.py's."""
    return name.startswith(RESERVED_PREFIX) or name in RESERVED_NAMES


def build_parser(env: Mapping[str, str] = os.environ) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="train.py",
        description="Pre-train a GPT decoder on token shards (SageMaker script mode or local).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,  # --warmup is not --warmup_steps
    )
    for h in SCHEMA:
        default = env.get(h.env, h.default) if h.env else h.default
        p.add_argument(f"--{h.name}", type=h.kind, default=default, help=f"{h.help} ({h.kind.expected})")
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


def check_hyperparameters(values: Mapping[str, Any]) -> dict[str, Any]:
    """Each value read as train.py reads it from SM_HPS (JSON-encoded, then parsed by its kind).

    Returns the parsed values of train.py's names (reserved names are skipped); raises
    HyperparameterError for an unknown name or a value train.py would refuse.
    """
    parsed = {}
    for name, value in values.items():
        if is_reserved(name):
            continue
        if name not in BY_NAME:
            close = difflib.get_close_matches(name, BY_NAME, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise HyperparameterError(name, value, f"a train.py hyperparameter ({hint}see python train.py --help)")
        kind = BY_NAME[name].kind
        try:
            parsed[name] = kind(_decode(json.dumps(value)))
        except (argparse.ArgumentTypeError, ValueError):  # ValueError: json.dumps of an int of 4,300 digits
            raise HyperparameterError(name, value, kind.expected) from None
    return parsed


def _without_reserved(argv: list[str]) -> tuple[list[str], list[str]]:
    """(argv without SageMaker's own ``--name value`` pairs, the names set aside)."""
    kept, reserved, i = [], [], 0
    while i < len(argv):
        name = argv[i][2:].split("=", 1)[0] if argv[i].startswith("--") else None
        if name is not None and is_reserved(name):
            reserved.append(argv[i].split("=", 1)[0])
            i += 1 if "=" in argv[i] or i + 1 == len(argv) or argv[i + 1].startswith("--") else 2
            continue
        kept.append(argv[i])
        i += 1
    return kept, reserved


def sm_hps_argv(env: Mapping[str, str] = os.environ) -> list[str]:
    """``SM_HPS`` as ``["--name", "value", ...]``."""
    hps = json.loads(env.get("SM_HPS") or "{}")
    argv: list[str] = []
    for name, value in hps.items():
        argv += [f"--{name}", _decode(value)]
    return argv


def parse_args(argv: list[str] | None = None, env: Mapping[str, str] = os.environ) -> argparse.Namespace:
    """SM_HPS first, then the command line (which wins); values that look JSON-encoded are decoded.

    An unknown name, an abbreviation or a bad value exits with argparse's usage error (status 2).
    """
    argv = sys.argv[1:] if argv is None else argv
    cli = [item if item.startswith("--") else _decode(item) for item in argv]
    kept, reserved = _without_reserved(sm_hps_argv(env) + cli)
    args = build_parser(env).parse_args(kept)
    args.ignored = reserved
    return args
