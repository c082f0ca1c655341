"""A received archive's weights go into this checkout's model, or are refused in one line; its graph is never read."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from data.token_shards import TOKENIZER_FILE

from conftest import write_dataset
from export.received import NotOurModel, rebuild


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny model's export, as a received archive unpacks (its tokenizer: the test dataset's, 384 ids)."""
    from gpt.model import GPT

    from export.saved_model import export

    root = tmp_path_factory.mktemp("received")
    dataset = write_dataset(root / "data")
    export(
        GPT.from_preset("tiny", vocab_size=384, sequence_length=16, seed=5), root / "model", dataset / TOKENIZER_FILE
    )
    return root / "model"


def test_the_weights_are_the_archive_s_and_its_graph_is_not_read(model_dir, tmp_path):
    import tensorflow as tf

    folder = shutil.copytree(model_dir, tmp_path / "model")
    (folder / "1" / "saved_model.pb").write_bytes(b"not a graph at all")  # never read
    model = rebuild(folder)
    reader = tf.train.load_checkpoint(str(model_dir / "1" / "variables" / "variables"))
    saved = {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map() if k.startswith("model/")}
    assert len(saved) == len(model.trainable_variables)
    assert sorted(float(np.sum(v)) for v in saved.values()) == sorted(float(np.sum(v)) for v in model.get_weights())


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"d_model": 65_536}, "shape needs 412,429,058,048 bytes of float32 weights; the archive's variables hold"),
        ({"n_layer": 1}, "the archive holds 12 weights this model does not have"),
        ({"sequence_length": 8}, "weight position_embedding/embeddings: this model has float32 [8, 64], the"),
        ({"n_head": 3}, "n_head 3 does not divide d_model 64"),
        ({"n_layer": "2; import os"}, "n_layer '2; import os' is not valid; expected an integer from 1 to 256"),
        ({"vocab_size": 10**12}, "vocab_size 1000000000000 is not valid"),
        ({"n_layer": True}, "n_layer True is not valid"),
        ({"layers": [1]}, "fields this model does not have: 'layers'"),
        ({"vocab_size": 383}, "tokenizer.json has 384 tokens; the model's vocab_size is 383"),  # the same rows
    ],
)
def test_an_archive_that_is_not_this_checkout_s_model_is_refused(model_dir, tmp_path, change, says):
    folder = shutil.copytree(model_dir, tmp_path / "model")
    config = json.loads((folder / "model_config.json").read_text())
    (folder / "model_config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(
        NotOurModel,
    ) as refused:
        rebuild(folder)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_damaged_variables_are_refused(model_dir, tmp_path):
    folder = shutil.copytree(model_dir, tmp_path / "model")
    (folder / "1" / "variables" / "variables.index").write_bytes(b"\0" * 64)
    with pytest.raises(NotOurModel, match="the variables cannot be read"):
        rebuild(folder)
