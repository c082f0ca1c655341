"""The Hugging Face export read by the real reader: transformers' own GPT2LMHeadModel and AutoTokenizer.

Run in the environment of requirements-hf.txt (transformers, a CPU torch), on a folder that
``tests/hf/reference.py`` wrote with the project's environment (``make hf-check`` runs both)::

    .venv-hf/bin/python tests/hf/check.py build/hf-check             # compare; exit 1 on any difference
    .venv-hf/bin/python tests/hf/check.py --write-table               # rewrite transformers_gpt2.json

It loads ``<folder>/model/hf`` with ``AutoModelForCausalLM`` and ``AutoTokenizer`` (no code of ours), and checks:
the model is GPT2LMHeadModel in float32 with no missing, unexpected or mismatched tensor and its head tied to
the token embedding; its logits on the reference tokens equal the project's (the SavedModel's ``logits``
signature) within ``TOLERANCE``; the tokenizer's ids equal the project's tokenizer's on the reference texts;
its bits per byte and their standard error over the reference's validation rows (its own cross-entropy of each
target, the bytes its tokenizer decodes the targets to) are the project's evaluation's within ``BPB_TOLERANCE``,
over exactly the same bytes (their total, and their rows' sum of squares); and ``transformers_gpt2.json``, the
table that ``make test`` checks the export against without torch, is still what this transformers gives.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel
from transformers.convert_slow_tokenizer import bytes_to_unicode

TOLERANCE = 1e-4  # float32 logits, the same weights, two implementations
# Relative, for bits per byte and its standard error: float32 logits within TOLERANCE put each target's nats within
# 2 x TOLERANCE, a relative 1e-4 of a loss of 2 nats (a random model's are several); float32 sums add ~1e-6.
BPB_TOLERANCE = 1e-4
TABLE = Path(__file__).with_name("transformers_gpt2.json")
TABLE_CONFIG = {"vocab_size": 80, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 2}  # no square tensor
# but the attention's output projection (d x d): make test's NumPy forward pass catches that one's transpose.


def gpt2_table() -> dict:
    """GPT-2's parameter names and shapes at ``TABLE_CONFIG``, its tied weights and its config's fields."""
    config = GPT2Config(**TABLE_CONFIG, bos_token_id=0, eos_token_id=0)
    with torch.device("meta"):
        model = GPT2LMHeadModel(config)
    return {
        "transformers": transformers.__version__,
        "config": TABLE_CONFIG,
        "state_dict": {name: list(tensor.shape) for name, tensor in model.state_dict().items()},
        "tied": model._tied_weights_keys,
        "config_fields": sorted(field.name for field in dataclasses.fields(GPT2Config)),
        "config_defaults": {"activation_function": config.activation_function, "n_inner": config.n_inner},
    }


def row_nats_and_bytes(model: GPT2LMHeadModel, tokenizer, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """transformers' own nats (float64 sums of each target's cross-entropy) and UTF-8 bytes (what the tokenizer
    decodes the targets to: a byte-level token's symbols mapped back to bytes, a special token none) of each of
    ``rows``, a sequence's inputs and, one later, its targets."""
    inputs, targets = torch.from_numpy(rows[:, :-1]).long(), torch.from_numpy(rows[:, 1:]).long()
    with torch.no_grad():
        logits = model(inputs).logits.double()
    nats = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none").sum(1).numpy()
    to_byte, special = {c: b for b, c in bytes_to_unicode().items()}, set(tokenizer.all_special_ids)
    sizes = [
        sum(len(bytes(to_byte[c] for c in tokenizer.convert_ids_to_tokens(i))) for i in row if i not in special)
        for row in targets.tolist()
    ]
    return nats, np.array(sizes)


def bits_per_byte(nats: np.ndarray, sizes: np.ndarray) -> tuple[float, float]:
    """Bits per byte of rows of ``nats`` over ``sizes`` bytes, and its standard error (the delta method)."""
    ratio, n = nats.sum() / sizes.sum(), len(nats)
    se = math.sqrt(((nats - ratio * sizes) ** 2).sum() / (n * (n - 1))) / sizes.mean()
    return ratio / math.log(2), se / math.log(2)


def check(folder: Path) -> list[str]:
    """What differs between the export, as transformers reads it, and the project's reference."""
    reference = np.load(folder / "reference.npz")
    texts = json.loads((folder / "texts.json").read_text(encoding="utf-8"))
    hf = folder / "model" / "hf"
    problems = []
    start = time.perf_counter()
    model, info = AutoModelForCausalLM.from_pretrained(hf, output_loading_info=True)
    loaded = time.perf_counter() - start
    if type(model) is not GPT2LMHeadModel or model.dtype != torch.float32:
        problems.append(f"loaded a {type(model).__name__} in {model.dtype}; expected GPT2LMHeadModel in float32")
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        if info.get(kind):
            problems.append(f"{kind}: {sorted(info[kind])}")
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        problems.append("lm_head.weight is not tied to transformer.wte.weight")
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(reference["token_ids"]).long()).logits.numpy()
    difference = float(np.abs(logits - reference["logits"]).max())
    scale = float(np.abs(reference["logits"]).max())
    print(
        f"logits {logits.shape}: largest difference {difference:.3g} (largest logit {scale:.3g}); load {loaded:.2f} s"
    )
    if logits.shape != reference["logits"].shape or not difference <= TOLERANCE:
        problems.append(f"logits differ by {difference:.3g} > {TOLERANCE:g}")

    tokenizer, before = AutoTokenizer.from_pretrained(hf), len(problems)
    for text, ours in zip(texts["texts"], texts["ids"], strict=True):
        theirs = tokenizer(text)["input_ids"]
        if theirs != ours:
            problems.append(f"tokenizer ids of {text[:40]!r}: {theirs[:12]}... != ours {ours[:12]}...")
        if tokenizer.decode(theirs) != text:
            problems.append(f"tokenizer decode of {text[:40]!r} gives {tokenizer.decode(theirs)[:40]!r}")
    eot = texts["end_of_text_id"]
    if (tokenizer.eos_token_id, tokenizer.bos_token_id, model.config.eos_token_id) != (eot, eot, eot):
        problems.append(f"eos/bos ids {tokenizer.eos_token_id}, {tokenizer.bos_token_id}; expected {eot}")
    same = "equal" if len(problems) == before else "different"
    print(f"tokenizer: {type(tokenizer).__name__}, {len(texts['texts'])} texts, ids and end-of-text {same}")

    project = json.loads((folder / "bits_per_byte.json").read_text())
    nats, sizes = row_nats_and_bytes(model, tokenizer, np.array(project["rows"]))
    theirs, se = bits_per_byte(nats, sizes)
    ours, ours_se = project["bits_per_byte"], project["bits_per_byte_se"]
    print(
        f"bits per byte: transformers {theirs:.6f} +- {se:.6f} ({nats.sum():.4f} nats / {sizes.sum()} bytes), "
        f"project {ours:.6f} +- {ours_se:.6f} ({project['nats']:.4f} nats / {project['bytes']:.0f} bytes); "
        f"difference {theirs - ours:.2e}"
    )
    if [sizes.sum(), (sizes**2).sum()] != [project["bytes"], project["bytes_squared"]]:
        problems.append(
            f"bytes (and their squares) {project['bytes']:.0f} ({project['bytes_squared']:.0f}) of the project's "
            f"evaluation are not the {sizes.sum()} ({(sizes**2).sum()}) transformers' tokenizer decodes"
        )
    for name, figure in (("bits_per_byte", theirs), ("bits_per_byte_se", se)):
        if not abs(figure - project[name]) <= BPB_TOLERANCE * figure:
            problems.append(f"{name} {project[name]:.6f} is not transformers' {figure:.6f} within {BPB_TOLERANCE:g}")

    if json.loads(TABLE.read_text()) != gpt2_table():
        problems.append(f"{TABLE.name} is not what transformers {transformers.__version__} gives: --write-table")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, help="what tests/hf/reference.py wrote")
    parser.add_argument("--write-table", action="store_true", help=f"rewrite {TABLE.name} from transformers")
    args = parser.parse_args(argv)
    if args.write_table:
        TABLE.write_text(json.dumps(gpt2_table(), indent=1) + "\n")
        return 0
    problems = check(args.folder)
    for problem in problems:
        print("FAIL", problem)
    print("hf-check: " + ("failed" if problems else f"transformers {transformers.__version__} reads the export"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
