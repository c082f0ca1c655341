"""Shared test fixtures: a tiny real dataset in the preprocessing format (not shipped: tests only).

A byte-level BPE tokenizer (384 ids) trained on a few Python standard-library modules, their text
encoded, packed into 33-token records (32-token context + 1) and written as 4 train and 2 validation
shards with a manifest, exactly as preprocessing does; and free ports for local multi-worker clusters.
"""

from __future__ import annotations

import email
import json
import os
import socket
from pathlib import Path

import pytest
from data import token_shards

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _two_logical_cpus() -> str | None:
    """Splits the CPU into two logical devices so MirroredStrategy has two replicas in tests; None when done,
    else why not.

    Possible only before TensorFlow initialises its devices. pytest imports this file before any test module
    (an initial conftest), so only something that ran TensorFlow earlier (a plugin, an embedding process) stops
    it; the tests that need two devices then fail (``two_logical_cpus``), they are not skipped.
    """
    import tensorflow as tf

    try:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        tf.config.threading.set_inter_op_parallelism_threads(2)
        tf.config.threading.set_intra_op_parallelism_threads(2)
    except RuntimeError as error:
        if len(tf.config.list_logical_devices("CPU")) < 2:
            return f"TensorFlow was initialised before training/conftest.py could split the CPU in two ({error})"
    return None


WHY_NOT_TWO_CPUS = _two_logical_cpus()


@pytest.fixture(scope="session")
def two_logical_cpus() -> None:
    """Fails (never skips) the tests that need two logical CPUs where the split was not possible."""
    if WHY_NOT_TWO_CPUS:
        pytest.fail(f"this test needs two logical CPUs: {WHY_NOT_TWO_CPUS}", pytrace=False)


@pytest.fixture(scope="session")
def mirrored_engine(two_logical_cpus):
    """One MirroredStrategy over the two logical CPUs for the whole session.

    TensorFlow numbers a strategy's collectives from the same first instance key, so a second strategy in the
    same process would reuse the first one's keys for tensors of other shapes ("Shape mismatch in the
    collective instance 100").
    """
    import tensorflow as tf
    from run.engines import StrategyEngine

    return StrategyEngine(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), "mirrored")


SEQUENCE_LENGTH = 32
VOCAB_SIZE = 384
# The smallest model the runs of the tests train on this dataset (run/loop_test.py, train_test.py): its arguments.
TINY_RUN = ["--model_preset", "tiny", "--sequence_length", "16", "--micro_batch_size", "2"]


def _corpus() -> list[str]:
    files = sorted(Path(json.__file__).parent.glob("*.py")) + sorted(Path(email.__file__).parent.glob("*.py"))[:12]
    return [f.read_text(encoding="utf-8") for f in files]


def write_dataset(
    root: Path, *, sequence_length: int = SEQUENCE_LENGTH, train_shards: int = 4, sources: tuple[str, ...] = ()
) -> Path:
    """Builds a dataset folder under ``root`` and returns it; ``sources``: shard n of each split is of source
    ``sources[n % len(sources)]`` (a mix; none: one source, ``""``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    root.mkdir(parents=True, exist_ok=True)
    texts = _corpus()
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[token_shards.END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer_path = root / token_shards.TOKENIZER_FILE
    tokenizer.save(str(tokenizer_path))
    eot = tokenizer.token_to_id(token_shards.END_OF_TEXT)
    vocab = tokenizer.get_vocab_size()
    dtype = token_shards.token_dtype(vocab)

    stream: list[int] = []
    for encoding in tokenizer.encode_batch(texts):
        stream += [*encoding.ids, eot]
    record = sequence_length + 1
    records = [stream[i : i + record] for i in range(0, len(stream) - record + 1, record)]
    n_valid = max(2, len(records) // 10)
    splits = {"validation": records[:n_valid], "train": records[n_valid:]}
    manifest = token_shards.Manifest(
        sequence_length=sequence_length,
        dtype=dtype,
        vocab_size=vocab,
        eot_token_id=eot,
        tokenizer_sha256=token_shards.sha256_of(tokenizer_path),
        hosts=["algo-1"],
        documents_read=len(texts),
    )
    for split, rows in splits.items():
        n_shards = train_shards if split == "train" else 2
        for n in range(n_shards):
            part = rows[n::n_shards]
            relative = f"{split}/algo-1-{n:05d}.tfrecord"
            (root / split).mkdir(exist_ok=True)
            with open(root / relative, "wb") as f:
                writer = token_shards.TFRecordWriter(f)
                for row in part:
                    writer.write(b"".join(t.to_bytes(2, "little") for t in row))
            manifest.shards.append(
                token_shards.ShardInfo(
                    relative,
                    split,
                    len(part),
                    len(part) * record,
                    token_shards.sha256_of(root / relative),
                    source=sources[n % len(sources)] if sources else "",
                )
            )
    token_shards.write_manifest_part(root, "algo-1", manifest)
    return root


@pytest.fixture(scope="session")
def dataset_dir(tmp_path_factory) -> Path:
    """A read-only tiny dataset shared by the whole session."""
    return write_dataset(tmp_path_factory.mktemp("dataset") / "tokens")


@pytest.fixture(autouse=True)
def _examples_dataset(request, doctest_namespace) -> None:
    """The docstring examples (collected by the root conftest.py) find the tiny dataset as ``dataset_dir``."""
    if isinstance(request.node, pytest.DoctestItem):
        doctest_namespace["dataset_dir"] = request.getfixturevalue("dataset_dir")


@pytest.fixture(scope="session")
def mixed_dataset_dir(tmp_path_factory) -> Path:
    """The tiny dataset as a mix of two sources: shards 0 and 2 of "code", 1 and 3 of "mail" (validation: 0, 1)."""
    return write_dataset(tmp_path_factory.mktemp("mixed") / "tokens", sources=("code", "mail"))


def free_ports(n: int) -> list[int]:
    """``n`` ports of 127.0.0.1 free now, for the workers of a local cluster (TF_CONFIG)."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def while_loops(function) -> list[tuple[str, int]]:
    """(name, parallel_iterations) of every While op of a concrete function, its loop bodies' included."""
    graph = function.graph.as_graph_def()
    nodes = [*graph.node, *(node for f in graph.library.function for node in f.node_def)]
    return [(n.name, n.attr["parallel_iterations"].i) for n in nodes if n.op in ("While", "StatelessWhile")]
