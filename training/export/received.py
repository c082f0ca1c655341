"""A model archive received from elsewhere, served as data: its weights in this checkout's GPT, never its graph.

A SavedModel's graph is a program (``tf.io.read_file`` and ``tf.io.write_file`` are ops like any other), so an
archive someone sent is never loaded with ``tf.saved_model.load``. What is read of it is data only:

    model_config.json                  the shape, checked (known keys, integers in train.py's ranges, a weight size
                                       the archive's variable files can hold) before anything is built
    <version>/variables/variables.*    the weights, read tensor by tensor with TensorFlow's checkpoint reader
                                       (an index and raw bytes; no op of the archive runs), each shape and dtype
                                       checked against this checkout's model before it is read
    tokenizer.json                     parsed by ``tokenizers`` (JSON), its vocabulary within the model's

``reexport`` then writes this checkout's export of that model (``saved_model.export``: its graph traced here, its
hooks from training/serving/), which is what ``python -m cli generate --model`` serves. Its saved_model.pb and
code/ are not read at all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tensorflow as tf
from contract.hparams import BY_NAME
from contract.presets import block_parameters
from gpt.model import GPT, padded_vocab

from export.saved_model import export

SHAPE_FIELDS = ("vocab_size", "sequence_length", "n_layer", "d_model", "n_head")
# What GPT.get_config writes beside the shape; ignored (the copy served is float32, dropout-free, with no recompute).
OTHER_FIELDS = ("name", "trainable", "dtype", "dropout", "recompute", "seed")
MAX_CONFIG_BYTES = 65_536


class NotOurModel(ValueError):
    """An archive whose files do not describe a model of this checkout's architecture; the message says which."""


def model_shape(model_dir: Path) -> dict[str, int]:
    """The shape in ``model_config.json``, every field checked against train.py's range for it."""
    path = Path(model_dir) / "model_config.json"
    if not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
        raise NotOurModel(f"{path.name}: missing or over {MAX_CONFIG_BYTES:,} bytes")
    try:
        config = json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        raise NotOurModel(f"{path.name}: not JSON") from None
    if not isinstance(config, dict):
        raise NotOurModel(f"{path.name}: not a JSON object")
    unknown = sorted(set(config) - {*SHAPE_FIELDS, *OTHER_FIELDS})
    if unknown:
        raise NotOurModel(f"{path.name}: fields this model does not have: {', '.join(map(repr, unknown[:5]))}")
    shape = {}
    for name in SHAPE_FIELDS:
        value, kind = config.get(name), BY_NAME[name].kind
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= kind.high:
            expected = f"an integer from 1 to {kind.high:,}"
            raise NotOurModel(f"{path.name}: {name} {value!r} is not valid; expected {expected}")
        shape[name] = value
    if shape["d_model"] % shape["n_head"]:
        raise NotOurModel(f"{path.name}: n_head {shape['n_head']} does not divide d_model {shape['d_model']}")
    return shape


def _weight_bytes(shape: dict[str, int]) -> int:
    """float32 bytes of the model's weights: embeddings (the token one padded), blocks, final LayerNorm."""
    d = shape["d_model"]
    embeddings = (padded_vocab(shape["vocab_size"]) + shape["sequence_length"]) * d
    return 4 * (embeddings + shape["n_layer"] * block_parameters(d) + 2 * d)


def _variables_prefix(model_dir: Path) -> Path:
    versions = [p for p in Path(model_dir).iterdir() if p.name.isdigit() and (p / "variables").is_dir()]
    if not versions:
        raise NotOurModel("no <version>/variables/ folder: not a SavedModel export")
    return max(versions, key=lambda p: int(p.name)) / "variables" / "variables"  # TF Serving serves the newest


def rebuild(model_dir: Path) -> GPT:
    """This checkout's GPT with the weights of the unpacked archive ``model_dir``; NotOurModel when they do not fit.

    Usage::

        model = rebuild(Path("received/model"))  # its model_config.json, 1/variables/, tokenizer.json
    """
    shape = model_shape(model_dir)
    prefix = _variables_prefix(model_dir)
    held = sum(p.stat().st_size for p in prefix.parent.glob("variables.data-*"))
    if _weight_bytes(shape) > held:  # before anything is allocated: the shape is the archive's claim
        raise NotOurModel(
            f"model_config.json's shape needs {_weight_bytes(shape):,} bytes of float32 weights; the archive's "
            f"variables hold {held:,}"
        )
    try:
        reader = tf.train.load_checkpoint(str(prefix))
    except (tf.errors.OpError, ValueError) as error:
        raise NotOurModel(f"the variables cannot be read ({str(error).splitlines()[0][:200]})") from None
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    keys = _checkpoint_keys(reader)
    model = GPT(**shape, dtype="float32")
    for variable in model.trainable_variables:
        path = variable.path.split("/", 1)[1]  # without the model's own name
        key = keys.get(path)
        if key is None or shapes.get(key) != list(variable.shape) or dtypes.get(key) != tf.float32:
            found = f"{dtypes.get(key).name} {shapes.get(key)}" if key in shapes else "nothing"
            raise NotOurModel(f"weight {path}: this model has float32 {list(variable.shape)}, the archive {found}")
        variable.assign(reader.get_tensor(key))
    if len(keys) > len(model.trainable_variables):
        extra = len(keys) - len(model.trainable_variables)
        raise NotOurModel(f"the archive holds {extra} weights this model does not have (another shape)")
    _check_tokenizer(Path(model_dir) / "tokenizer.json", shape["vocab_size"])
    return model


def _checkpoint_keys(reader: Any) -> dict[str, str]:
    """Each saved variable's path (without the model's name) -> its key in the checkpoint, from the checkpoint's
    object graph (a protocol buffer: data)."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    try:
        graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    except Exception as error:  # a missing key (NotFoundError) or a damaged proto (DecodeError)
        raise NotOurModel(f"the variables hold no readable object graph ({type(error).__name__})") from None
    return {
        attribute.full_name.split("/", 1)[-1]: attribute.checkpoint_key
        for node in graph.nodes
        for attribute in node.attributes
    }


def _check_tokenizer(path: Path, vocab_size: int) -> None:
    from tokenizers import Tokenizer

    try:
        size = Tokenizer.from_file(str(path)).get_vocab_size()
    except Exception as error:  # tokenizers raises its own Exception for a file it cannot parse
        raise NotOurModel(f"tokenizer.json cannot be read ({str(error)[:200]})") from None
    if size > vocab_size:
        raise NotOurModel(f"tokenizer.json has {size:,} tokens; the model's vocab_size is {vocab_size:,}")


def reexport(model_dir: Path, dest: Path) -> Path:
    """This checkout's export (SavedModel, tokenizer, model_config, hooks) of the archive's weights, in ``dest``."""
    export(rebuild(model_dir), dest, Path(model_dir) / "tokenizer.json")
    return Path(dest)
