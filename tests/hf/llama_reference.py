"""The project's side of ``make hf-check`` for the Llama family: our exports for transformers to read, and our
import of the checkpoints transformers wrote (``tests/hf/llama_check.py``, transformers' side).

Run with the project's environment (TensorFlow)::

    .venv/bin/python tests/hf/llama_reference.py build/hf-check-llama export   # first
    .venv-hf/bin/python tests/hf/llama_check.py build/hf-check-llama            # then transformers
    .venv/bin/python tests/hf/llama_reference.py build/hf-check-llama import   # last; exit 1 on any difference

``export`` writes ``<folder>/ours/<name>`` (``OURS``: grouped-query attention with llama3 rope scaling and an untied
head; multi-head attention, tied) with weights far from their initialisation, and ``<name>.npz``: random ids and
our logits. ``import`` reads each ``<folder>/theirs/<name>`` with ``export.llama_hf.import_llama_hf`` (data
only) and checks that our logits equal transformers' within ``TOLERANCE``, and that a round trip ours -> HF ->
ours is exact: every weight bit for bit, the logits bit for bit, and the second export byte for byte the first.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "training")]  # run as a script: the training package
TOLERANCE = 1e-4  # llama_check.py's
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
OURS = {
    "gqa-llama3-untied": dict(
        vocab_size=90,
        sequence_length=32,
        n_layer=2,
        d_model=64,
        n_head=8,
        n_kv_head=2,
        d_ff=96,
        rope_theta=500_000.0,
        rope_scaling={**LLAMA3, "original_max_position_embeddings": 16},
        tie_embeddings=False,
    ),
    "mha-tied": dict(vocab_size=90, sequence_length=32, n_layer=3, d_model=48, n_head=4, n_kv_head=4, d_ff=64),
}


def export(folder: Path) -> None:
    import keras
    import tensorflow as tf
    from export.llama_hf import export_llama_hf
    from gpt.llama import Llama

    shutil.rmtree(folder, ignore_errors=True)
    for i, (name, arguments) in enumerate(OURS.items()):
        keras.utils.set_random_seed(i)  # the same weights every run
        model = Llama(**arguments, seed=i)
        rng = np.random.default_rng(i)
        model.set_weights([w + rng.normal(0, 0.3, w.shape).astype(w.dtype) for w in model.get_weights()])
        ids = rng.integers(0, arguments["vocab_size"], [2, arguments["sequence_length"]]).astype(np.int32)
        logits = model(tf.constant(ids)).numpy()
        export_llama_hf(model, folder / "ours" / name, bos_token_id=0, eos_token_id=1)
        np.savez(folder / "ours" / f"{name}.npz", token_ids=ids, logits=logits)
        print(f"ours: {name}, logits up to {np.abs(logits).max():.3g}")


def import_and_round_trip(folder: Path) -> list[str]:
    import tensorflow as tf
    from export.llama_hf import export_llama_hf, import_llama_hf

    problems, names = [], sorted(p.name for p in (folder / "theirs").iterdir() if p.is_dir())
    for name in names:
        reference = np.load(folder / "theirs" / f"{name}.npz")
        model = import_llama_hf(folder / "theirs" / name)
        ids = tf.constant(reference["token_ids"])
        logits = model(ids).numpy()
        difference = float(np.abs(logits - reference["logits"]).max())
        print(
            f"transformers -> ours, {name}: {model.n_head} heads on {model.n_kv_head} kv, rope "
            f"{(model.rope_scaling or {}).get('rope_type', 'default')}, tied {model.tie_embeddings}: largest logit "
            f"difference {difference:.3g} (largest logit {np.abs(reference['logits']).max():.3g})"
        )
        if logits.shape != reference["logits"].shape or not difference <= TOLERANCE:
            problems.append(f"{name}: logits differ by {difference:.3g} > {TOLERANCE:g}")
        with tempfile.TemporaryDirectory() as scratch:
            first = export_llama_hf(model, Path(scratch) / "first", bos_token_id=0, eos_token_id=1)
            again = import_llama_hf(first)
            second = export_llama_hf(again, Path(scratch) / "second", bos_token_id=0, eos_token_id=1)
            same_weights = all(
                np.array_equal(a, b) for a, b in zip(model.get_weights(), again.get_weights(), strict=True)
            )
            same_bytes = all(
                (first / f).read_bytes() == (second / f).read_bytes() for f in ("config.json", "model.safetensors")
            )
            same_logits = np.array_equal(again(ids).numpy(), logits)
        print(
            f"round trip ours -> HF -> ours, {name}: weights, logits and files "
            + ("identical" if same_weights and same_bytes and same_logits else "DIFFERENT")
        )
        if not (same_weights and same_bytes and same_logits):
            problems.append(f"{name}: round trip weights {same_weights}, files {same_bytes}, logits {same_logits}")
    if not names:
        problems.append(f"nothing in {folder / 'theirs'}: run tests/hf/llama_check.py {folder} first")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("step", choices=("export", "import"))
    args = parser.parse_args(argv)
    if args.step == "export":
        export(args.folder)
        return 0
    problems = import_and_round_trip(args.folder)
    for problem in problems:
        print("FAIL", problem)
    print("hf-check llama: " + ("failed" if problems else "our import reads transformers' checkpoints"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
