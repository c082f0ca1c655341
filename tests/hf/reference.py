"""The project's side of ``make hf-check``: an exported model folder and what the project's model says on it.

Run with the project's environment (TensorFlow, tokenizers)::

    .venv/bin/python tests/hf/reference.py build/hf-check                           # a model made here
    .venv/bin/python tests/hf/reference.py build/hf-check --archive runs/.../model.tar.gz   # a job's model

Without ``--archive`` it makes the hard case: a tokenizer trained on standard-library sources and a bf16
GPT split into two pipeline stages (two logical CPUs), its weights drawn far from their initialisation so
that the logits span several units, exported as a training job exports (``TrainingRun.finish``: a float32
copy made on the host, the SavedModel, the Hugging Face folder). With ``--archive`` it unpacks a job's
``model.tar.gz``. Either way ``<folder>/model`` is then read as a job's export is, and it writes
``reference.npz`` (token ids, and their logits from the SavedModel's ``logits`` signature), ``texts.json``
(texts and the ids the project's tokenizer gives them) and ``bits_per_byte.json`` (validation-like rows of
``sequence_length + 1`` tokens and the bits per byte that evaluation gives them, ``run.trainer``'s
``evaluation_loss_sums`` with ``pile.bpe.token_byte_lengths``) for ``tests/hf/check.py`` to compare with
transformers.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "training"), str(ROOT)]  # run as a script: the training package and infra/
TEXTS = [
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "def f(x):\n    return x ** 2  # squares\n\n\n\tindented\r\n  trailing  ",
    "naïve café, Zürich, 東京, Ελληνικά, emoji 🤖🚀 and a zero-width\u200bjoiner",
    "first document<|endoftext|>second document",
    "",
    " leading space and 12345 67.89 numbers",
]


def _two_cpus() -> list[str]:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    return ["/CPU:0", "/CPU:1"]


def make_model_folder(model_dir: Path) -> None:
    """A pipelined bf16 model with far-from-initial weights, exported as ``TrainingRun.finish`` exports."""
    devices = _two_cpus()
    import keras
    import tensorflow as tf
    from export.hugging_face import HF_DIR, export_hf
    from export.saved_model import export, float32_copy
    from gpt.pipeline.model import PipelinedGPT
    from pile.bpe import train_bpe
    from pile.sample_corpus import stdlib_documents

    tokenizer = train_bpe(stdlib_documents(2_000_000), vocab_size=1024)
    tokenizer_path = model_dir.parent / "tokenizer.json"
    model_dir.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(tokenizer_path))
    vocab = tokenizer.get_vocab_size()
    keras.utils.set_random_seed(0)
    model = PipelinedGPT(vocab, 64, 3, 96, 4, dropout=0.1, dtype="mixed_bfloat16", devices=devices)
    rng = np.random.default_rng(7)
    model.set_weights([w + rng.normal(0, 0.2, w.shape).astype(w.dtype) for w in model.get_weights()])
    with tf.device("/CPU:0"):  # parallelism.Pipelined.export_device
        copy = float32_copy(model)
    export(copy, model_dir, tokenizer_path)
    export_hf(copy, model_dir / HF_DIR, tokenizer_path, dropout=model.dropout)


def write_reference(folder: Path) -> None:
    import tensorflow as tf
    from tokenizers import Tokenizer

    model_dir = folder / "model"
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))  # as the job and the endpoint encode
    length = json.loads((model_dir / "model_config.json").read_text())["sequence_length"]
    stream = [i for text in TEXTS + TEXTS[:3] * 20 for i in tokenizer.encode(text).ids]
    token_ids = np.array([stream[:length], stream[length : 2 * length]], np.int32)
    served = tf.saved_model.load(str(model_dir / "1")).signatures["logits"]
    logits = served(token_ids=tf.constant(token_ids))["logits"].numpy()
    np.savez(folder / "reference.npz", token_ids=token_ids, logits=logits)
    texts = {
        "texts": TEXTS,
        "ids": [tokenizer.encode(text).ids for text in TEXTS],
        "end_of_text_id": tokenizer.token_to_id("<|endoftext|>"),
    }
    (folder / "texts.json").write_text(json.dumps(texts, ensure_ascii=False))
    print(f"reference: {token_ids.shape} tokens, logits up to {np.abs(logits).max():.3g}, in {folder}")
    write_bits_per_byte(folder, lambda ids: served(token_ids=tf.constant(ids))["logits"].numpy())


def validation_rows(tokenizer_json: str, length: int, rows: int = 8) -> np.ndarray:
    """``rows`` rows of ``length + 1`` tokens as a validation split holds them: documents (``TEXTS``, with their
    non-ASCII characters, then standard-library sources) encoded as preprocessing encodes them, each followed by
    end-of-text (``pile.encode.Encoder``), and the stream cut into rows."""
    from pile.bpe import encoder_from_json, eot_id
    from pile.sample_corpus import stdlib_documents

    tokenizer = encoder_from_json(tokenizer_json)
    documents = [text for text in TEXTS if text] + stdlib_documents(rows * (length + 1) * 8, 2_000)
    stream = [i for e in tokenizer.encode_batch(documents) for i in [*e.ids, eot_id(tokenizer)]]
    return np.array(stream[: rows * (length + 1)], np.int32).reshape(rows, length + 1)


def write_bits_per_byte(folder: Path, logits_of: Callable[[np.ndarray], np.ndarray]) -> None:
    """``bits_per_byte.json``: ``validation_rows`` and what evaluation (``Trainer.evaluate``) makes of them with
    the exported model's ``logits_of`` their first ``sequence_length`` tokens."""
    import tensorflow as tf
    from observe.metrics import Evaluation
    from pile.bpe import token_byte_lengths
    from run.trainer import evaluation_loss_sums
    from tokenizers import Tokenizer

    model_dir = folder / "model"
    config = json.loads((model_dir / "model_config.json").read_text())
    tokenizer_json = (model_dir / "tokenizer.json").read_text()
    rows = validation_rows(tokenizer_json, config["sequence_length"])
    token_bytes = token_byte_lengths(Tokenizer.from_str(tokenizer_json), config["vocab_size"])  # as loop.py's
    weighted = tf.constant(np.concatenate([rows, np.ones((len(rows), 1), np.int32)], 1))  # each row's weight 1
    logits = tf.constant(logits_of(rows[:, :-1]))
    sums = evaluation_loss_sums(logits, weighted, tf.constant(token_bytes, tf.float32)).numpy().astype(np.float64)
    evaluation = Evaluation.from_sums(*sums)  # as Trainer.evaluation_sums, then TrainingRun.evaluate
    figure = {"rows": rows.tolist(), "nats": sums[3], "bytes": sums[4], "bytes_squared": sums[6]}
    figure.update(bits_per_byte=evaluation.bits_per_byte, bits_per_byte_se=evaluation.bits_per_byte_se)
    (folder / "bits_per_byte.json").write_text(json.dumps(figure))
    print(f"reference: {rows.shape} rows, {evaluation.bits_per_byte:.6f} bits per byte over {sums[4]:.0f} bytes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--archive", type=Path, help="a training job's model.tar.gz (make run's: runs/s3/...)")
    args = parser.parse_args(argv)
    from infra.archives import extract

    shutil.rmtree(args.folder, ignore_errors=True)
    if args.archive:
        extract(args.archive, args.folder / "model")
    else:
        make_model_folder(args.folder / "model")
    write_reference(args.folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
