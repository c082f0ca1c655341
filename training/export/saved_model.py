"""SavedModel export for serving (TensorFlow Serving / the SageMaker TF inference container).

    <export_dir>/             packed by SageMaker into model.tar.gz, unpacked by the endpoint into /opt/ml/model
        1/                    SavedModel, version 1 (TF Serving loads numbered versions)
        tokenizer.json        the tokenizer the model was trained with
        model_config.json     GPT constructor arguments
        code/inference.py     the container's pre/post-processing hooks (text in, text out), from serving/
        code/requirements.txt tokenizers, which the hooks need
        code/lib/tokenizers/  the installed tokenizers package, when exported on Linux x86-64 (endpoints without
                              internet access cannot pip install; the container then ignores requirements.txt)
        hf/                   the Hugging Face GPT-2 checkpoint, written beside this by hugging_face.py

Signatures:
    serving_default (generate; decoding in a tf.while_loop with a key/value cache)
        inputs   prompt_ids      int32 [batch, prompt_length]   token ids of the prompts
                 max_new_tokens  int32 []                       tokens to add
                 temperature     float32 []                     0 = greedy, > 0 = sampling
                 top_k           int32 []                       > 0 = sample among the k most likely; 0 = all
                 seed            int32 []                       sampling seed
        outputs  token_ids       int32 [batch, max_new_tokens]  the continuation only
    logits
        inputs   token_ids       int32 [batch, length]          length <= sequence_length
        outputs  logits          float32 [batch, length, vocab]

The exported weights are float32 whatever the training precision.
"""

from __future__ import annotations

import json
import platform
import shutil
import sys
from pathlib import Path

import tensorflow as tf
from gpt.generate import generate
from gpt.model import GPT

SAVED_MODEL_VERSION = "1"
SERVING_CODE = Path(__file__).resolve().parents[1] / "serving"


class GPTServing(tf.Module):
    """The serving functions around a GPT."""

    def __init__(self, model: GPT):
        super().__init__()
        self.model = model

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None], tf.int32, name="prompt_ids"),
            tf.TensorSpec([], tf.int32, name="max_new_tokens"),
            tf.TensorSpec([], tf.float32, name="temperature"),
            tf.TensorSpec([], tf.int32, name="seed"),
            tf.TensorSpec([], tf.int32, name="top_k"),
        ]
    )
    def generate(self, prompt_ids, max_new_tokens, temperature, seed, top_k=0):
        return {"token_ids": generate(self.model, prompt_ids, max_new_tokens, temperature, seed, top_k)}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="token_ids")])
    def logits(self, token_ids):
        return {"logits": self.model(token_ids, training=False)}


def float32_copy(model: GPT) -> GPT:
    """A float32, dropout-free copy of a (possibly mixed-precision, distributed) model, for export and samples.

    Call it outside ``strategy.scope()``: the copy's variables are then plain, single-device ones.
    """
    config = {**model.get_config(), "dtype": "float32", "dropout": 0.0, "recompute": "none"}
    copy = GPT.from_config(config)
    copy.set_weights(model.get_weights())
    return copy


def export(model: GPT, export_dir: str | Path, tokenizer_path: str | Path) -> GPTServing:
    """Writes ``<export_dir>/1`` (SavedModel), tokenizer.json and model_config.json; returns the serving module
    (its ``path`` is the SavedModel folder, its traced ``generate`` serves the end-of-run sample)."""
    export_dir = Path(export_dir)
    export_dir.mkdir(parents=True, exist_ok=True)
    serving = GPTServing(model)
    path = export_dir / SAVED_MODEL_VERSION
    tf.saved_model.save(serving, str(path), signatures={"serving_default": serving.generate, "logits": serving.logits})
    shutil.copyfile(tokenizer_path, export_dir / "tokenizer.json")
    (export_dir / "model_config.json").write_text(json.dumps(model.get_config(), indent=2, sort_keys=True))
    write_serving_code(export_dir / "code")
    serving.path = path
    return serving


def write_serving_code(code_dir: Path) -> None:
    """The container's hooks (``code/inference.py``, ``code/requirements.txt``) and, on Linux x86-64, ``code/lib``
    with the installed tokenizers package (an abi3 wheel: any CPython >= 3.10 on that platform)."""
    code_dir.mkdir(parents=True, exist_ok=True)
    for name in ("inference.py", "requirements.txt"):
        shutil.copyfile(SERVING_CODE / name, code_dir / name)
    if sys.platform == "linux" and platform.machine() == "x86_64":
        import tokenizers

        package = Path(tokenizers.__file__).parent
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(package, code_dir / "lib" / package.name, ignore=ignore, dirs_exist_ok=True)
