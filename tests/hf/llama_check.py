"""transformers' side of ``make hf-check`` for the Llama family: LlamaForCausalLM reads our export, and writes the
random checkpoints that our import reads (``tests/hf/llama_reference.py``, the project's side).

Run in the environment of requirements-hf.txt (transformers, a CPU torch)::

    .venv-hf/bin/python tests/hf/llama_check.py build/hf-check-llama    # after llama_reference.py export
    .venv-hf/bin/python tests/hf/llama_check.py --write-table             # rewrite transformers_llama.json

For each ``<folder>/ours/<name>`` (our export): ``AutoModelForCausalLM`` loads a LlamaForCausalLM in float32 with
no missing, unexpected or mismatched tensor, tied exactly when the config says so, and its logits on the
reference ids equal ours within ``TOLERANCE``. Then it writes ``<folder>/theirs/<name>``: tiny random LlamaConfigs
made here (``THEIRS``: grouped-query with llama3 rope scaling and an untied head; multi-head, tied), saved by
``save_pretrained`` (safetensors), and ``<name>.npz`` (ids and transformers' logits), for the import to match. And
``transformers_llama.json``, the table that ``make test`` checks the export against without torch, is still what
this transformers gives.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

TOLERANCE = 1e-4  # float32 logits, the same weights, two implementations (as check.py's)
TABLE = Path(__file__).with_name("transformers_llama.json")
TABLE_CONFIG = {
    "vocab_size": 80,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "tie_word_embeddings": False,
}
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
THEIRS = {  # positions up to 32 pass the original context of 16: all three of llama3's bands are used
    "gqa-llama3-untied": {
        "vocab_size": 96,
        "hidden_size": 64,
        "intermediate_size": 112,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 64,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500_000.0,
        "rope_scaling": {**LLAMA3, "original_max_position_embeddings": 16},
        "tie_word_embeddings": False,
    },
    "mha-tied": {
        "vocab_size": 96,
        "hidden_size": 48,
        "intermediate_size": 80,
        "num_hidden_layers": 3,
        "num_attention_heads": 3,
        "num_key_value_heads": 3,
        "max_position_embeddings": 32,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10_000.0,
        "tie_word_embeddings": True,
    },
}


def llama_table() -> dict:
    """LlamaForCausalLM's parameter names and shapes at ``TABLE_CONFIG``, its tied weights, its config's fields."""
    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(**TABLE_CONFIG))
    tied = LlamaForCausalLM(LlamaConfig(**{**TABLE_CONFIG, "tie_word_embeddings": True}))
    return {
        "transformers": transformers.__version__,
        "config": TABLE_CONFIG,
        "state_dict": {name: list(tensor.shape) for name, tensor in model.state_dict().items()},
        "tied": tied._tied_weights_keys,
        "config_fields": sorted(field.name for field in dataclasses.fields(LlamaConfig)),
    }


def check_ours(folder: Path) -> list[str]:
    """What differs between each of our exports, as transformers reads it, and our logits."""
    problems = []
    for npz in sorted((folder / "ours").glob("*.npz")):
        hf, reference = npz.with_suffix(""), np.load(npz)
        model, info = AutoModelForCausalLM.from_pretrained(hf, output_loading_info=True)
        name = hf.name
        if type(model) is not LlamaForCausalLM or model.dtype != torch.float32:
            problems.append(f"{name}: loaded a {type(model).__name__} in {model.dtype}; expected LlamaForCausalLM")
        for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
            if info.get(kind):
                problems.append(f"{name}: {kind}: {sorted(info[kind])}")
        tied = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
        if tied != model.config.tie_word_embeddings:
            problems.append(
                f"{name}: lm_head tied {tied}, config's tie_word_embeddings {model.config.tie_word_embeddings}"
            )
        model.eval()
        with torch.no_grad():
            logits = model(torch.from_numpy(reference["token_ids"]).long()).logits.numpy()
        difference = float(np.abs(logits - reference["logits"]).max())
        print(
            f"ours -> transformers, {name}: {model.config.num_attention_heads} heads on "
            f"{model.config.num_key_value_heads} kv, rope {model.config.rope_parameters.get('rope_type')}, "
            f"tied {tied}: "
            f"largest logit difference {difference:.3g} (largest logit {np.abs(reference['logits']).max():.3g})"
        )
        if logits.shape != reference["logits"].shape or not difference <= TOLERANCE:
            problems.append(f"{name}: logits differ by {difference:.3g} > {TOLERANCE:g}")
    if not problems and not list((folder / "ours").glob("*.npz")):
        problems.append(f"no exports in {folder / 'ours'}: run tests/hf/llama_reference.py {folder} export first")
    return problems


def write_theirs(folder: Path) -> None:
    """Each of ``THEIRS`` with random weights far from their initialisation (logits of several units), saved as
    transformers saves a checkpoint, and its logits on random ids."""
    for i, (name, fields) in enumerate(THEIRS.items()):
        torch.manual_seed(i)
        model = LlamaForCausalLM(LlamaConfig(**fields, bos_token_id=0, eos_token_id=1)).eval()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.3)
            ids = torch.randint(0, fields["vocab_size"], (2, 32), generator=torch.Generator().manual_seed(i))
            logits = model(ids).logits.numpy()
        model.save_pretrained(folder / "theirs" / name)
        np.savez(folder / "theirs" / f"{name}.npz", token_ids=ids.numpy().astype(np.int32), logits=logits)
        print(f"transformers wrote {name}: logits up to {np.abs(logits).max():.3g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, help="what tests/hf/llama_reference.py wrote")
    parser.add_argument("--write-table", action="store_true", help=f"rewrite {TABLE.name} from transformers")
    args = parser.parse_args(argv)
    if args.write_table:
        TABLE.write_text(json.dumps(llama_table(), indent=1) + "\n")
        return 0
    problems = check_ours(args.folder)
    if json.loads(TABLE.read_text()) != llama_table():
        problems.append(f"{TABLE.name} is not what transformers {transformers.__version__} gives: --write-table")
    write_theirs(args.folder)
    for problem in problems:
        print("FAIL", problem)
    print("hf-check llama: " + ("failed" if problems else f"transformers {transformers.__version__} reads our export"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
