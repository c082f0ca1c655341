"""Checkpoints: everything needed to continue a run exactly where it stopped.

    <checkpoint_dir>/
        checkpoint                   TF's index: the newest complete checkpoint
        ckpt-<step>.index / .data-*  model weights, AdamW moments and iterations, step, fp16 loss scale,
                                     the dropout SeedGenerator states, the data position
        run_config.json              model shape and data settings, checked when a run resumes
        ckpt-<step>_temp/            a write in progress (TF renames it when complete); the chief deletes
                                     leftovers of killed writes when it starts

    with several hosts (``hosts`` > 1) every host writes its share of the variables at once:
        ckpt-<step>.share-<h>-of-<H>.index / .data-*   host h's share (a TF checkpoint of its variables)
        ckpt-<step>.json             the manifest: which variables each share holds; the chief writes it once
                                     every host has said its share is on disk (``all_done``, a collective)

The shares are balanced by bytes (each host writes about 1/H of the checkpoint: the save takes about 1/H of
the time one writer takes). A sharded checkpoint counts only with its manifest; every host restores every
share (SageMaker syncs each host's folder to the same S3 prefix and downloads all of it to every host), so
it restores onto any host count. A torn one (a share missing or cut short) is passed over as before.

The data position is global: the index of the next sequence of the stream (``data/sequence_order.py``), the
same number whatever the number of workers; a resumed run starts its stream there
(``data.token_dataset(start_sequence=...)``), on any cluster. Only the chief writes; every worker
restores. Saves are asynchronous where TF allows: variables are copied in the step and written in the
background; ``wait`` blocks until done.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

# What reading a torn checkpoint raises: a missing file (an OpError), a file cut short (IndexError: "Read less bytes
# than requested"), a checksum mismatch (DataLossError, an OpError), or the reader's RuntimeError.
TORN = (tf.errors.OpError, IndexError, RuntimeError)


def _tf_variable(variable):
    """The tf.Variable (or distributed variable) inside a Keras variable."""
    return getattr(variable, "value", variable)


class CheckpointMismatch(ValueError):
    """The checkpoint belongs to a differently shaped model: resuming would fail or be wrong."""


class Checkpointer:
    """Saves every N steps, keeps the newest K, restores the newest.

    Args:
        directory: where checkpoints live (SageMaker syncs /opt/ml/checkpoints with S3).
        model: the GPT.
        trainer: the Trainer (its step, loss scale and optimizer are saved).
        keep: how many checkpoints to keep.
        is_chief: only the chief writes.
        run_config: JSON-able description of the run; its "model" part must match when resuming.
        async_save: write in the background (one host; with several, each waits for its share).
        sequences_per_step: the global batch in sequences (what one step moves the data position by).
        host, hosts: this host's index and the number of hosts writing shares (1: the chief writes it all).
        all_done: ``all_done(ok)`` -> whether every host passed True (a collective every host calls);
            required with several hosts.

    Usage (a model and trainer as ``run.loop`` makes them)::

        checkpointer = Checkpointer("/opt/ml/checkpoints", model, trainer, keep=3, is_chief=True, run_config={})
        start_step = checkpointer.restore_latest()  # 0 for a fresh run
        checkpointer.save()
    """

    def __init__(
        self,
        directory: str | Path,
        model,
        trainer,
        *,
        keep: int,
        is_chief: bool,
        run_config: dict,
        async_save: bool = True,
        sequences_per_step: int = 1,
        host: int = 0,
        hosts: int = 1,
        all_done: Callable[[bool], bool] | None = None,
    ):
        if hosts > 1 and all_done is None:
            raise ValueError("a checkpoint written by several hosts needs all_done (every host's share written)")
        self.directory, self.is_chief, self.run_config = Path(directory), is_chief, run_config
        self.host, self.hosts, self.all_done, self.keep = host, hosts, all_done, keep
        self.published: list[int] = []  # steps whose every share this run wrote
        self.step, self.sequences_per_step = trainer.step, sequences_per_step
        self.data_sequences = tf.Variable(0, dtype=tf.int64, trainable=False)  # as of the checkpoint's step
        self.start_step = self.start_sequence = 0  # where this run started (restored)
        # Plain tf.Variables, in construction order: Keras 3 objects break asynchronous saving (they
        # create variables inside TF's copy function on the second save) and their names change when a
        # process builds a second model.
        self.checkpoint = tf.train.Checkpoint(
            model_weights=[_tf_variable(v) for v in model.weights],
            optimizer_variables=[_tf_variable(v) for v in trainer.optimizer.variables],
            step=trainer.step,
            loss_scale=trainer.loss_scale,
            finite_steps_since_scale_change=trainer.good_steps,
            # Not in model.weights (Keras 3 keeps SeedGenerator states out of it, as its own checkpoints do):
            # without them dropout diverges after a resume.
            dropout_seed_states=[_tf_variable(v) for v in model.seed_state_variables()],
            data_sequences=self.data_sequences,
        )
        self.manager = tf.train.CheckpointManager(self.checkpoint, str(self.directory), max_to_keep=keep)
        # Every saved variable in one order, the sharded checkpoints' names ("v<i>") index it.
        self.variables = [
            *self.checkpoint.model_weights, *self.checkpoint.optimizer_variables, *self.checkpoint.dropout_seed_states,
            trainer.step, trainer.loss_scale, trainer.good_steps, self.data_sequences,
        ]  # fmt: skip
        if is_chief or hosts > 1:  # each host's own disk
            self.remove_partial_writes()
        self.options = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=async_save)

    def remove_partial_writes(self) -> None:
        """Deletes the ``ckpt-<step>_temp`` folders of writes that were killed (SageMaker would upload them)."""
        for path in self.directory.glob("ckpt-*_temp") if self.directory.is_dir() else ():
            if re.fullmatch(r"ckpt-\d+(\.share-\d+-of-\d+)?_temp", path.name) and path.is_dir():
                shutil.rmtree(path)

    @property
    def config_path(self) -> Path:
        return self.directory / "run_config.json"

    def on_disk(self) -> list[str]:
        """Every checkpoint here, newest first, not only what TF's ``checkpoint`` file names: SageMaker uploads the
        folder file by file, so S3 may hold that small file, written last, without the data it names.
        A sharded checkpoint is named by its manifest (``ckpt-<step>.json``)."""
        found = {}
        for path in self.directory.glob("ckpt-*") if self.directory.is_dir() else ():
            match = re.fullmatch(r"ckpt-(\d+)\.(index|json)", path.name)
            if match:  # a step with both kinds: the sharded one (written later by this code)
                found[int(match[1])] = path.name if match[2] == "json" else path.name.removesuffix(".index")
        return [str(self.directory / found[step]) for step in sorted(found, reverse=True)]

    def restore_latest(self) -> int:
        """Restores the newest whole checkpoint if there is one; returns the step to continue from (0 if none).

        A torn one (its data missing or cut short: TF checks every read and every tensor's checksum) is passed over
        for the next older one, with a note.
        """
        candidates = self.on_disk()
        if candidates:
            self._check_config(candidates[0])
        for latest in candidates:
            try:
                return self._restore(latest)
            except TORN as error:
                print(f"[checkpoint] {latest} is not whole ({type(error).__name__}): trying the one before", flush=True)
        return 0

    def _check_config(self, latest: str) -> None:
        if self.config_path.is_file():
            saved = json.loads(self.config_path.read_text())
            if saved.get("model") != self.run_config.get("model"):
                raise CheckpointMismatch(
                    f"{latest} was written for model {saved.get('model')}, this run builds "
                    f"{self.run_config.get('model')} (a different preset, vocabulary or sequence length): "
                    "use another checkpoint_dir"
                )
            if saved.get("data") != self.run_config.get("data"):
                print(
                    f"[checkpoint] data settings changed since {latest}: {saved.get('data')} -> "
                    f"{self.run_config.get('data')}; the data order will differ from an uninterrupted run",
                    flush=True,
                )

    def _restore(self, latest: str) -> int:
        if latest.endswith(".json"):
            return self._restore_shares(latest)
        status = self.checkpoint.restore(latest)
        if any(name.startswith("data_sequences/") for name, _ in tf.train.list_variables(latest)):
            status.assert_existing_objects_matched()
            self.start_step, self.start_sequence = int(self.step.read_value()), int(self.data_sequences.read_value())
        else:  # written before the data position was global: as many sequences as its steps took
            status.expect_partial()
            self.start_step = int(self.step.read_value())
            self.start_sequence = self.start_step * self.sequences_per_step
            print(f"[checkpoint] {latest} has no global data position: resuming at sequence {self.start_sequence:,}")
        return self.start_step

    def _restore_shares(self, manifest_path: str) -> int:
        """Restores every share a manifest names (whatever host count wrote them)."""
        manifest = json.loads(Path(manifest_path).read_text())
        prefix = manifest_path.removesuffix(".json")
        for h, share in enumerate(manifest["shares"]):
            part = tf.train.Checkpoint(**{f"v{i}": self.variables[i] for i in share})
            part.read(f"{prefix}.share-{h}-of-{manifest['hosts']}").assert_consumed()
        self.start_step, self.start_sequence = int(self.step.read_value()), int(self.data_sequences.read_value())
        return self.start_step

    def save(self) -> str | None:
        """Writes a checkpoint named after the step (the chief; with several hosts, every host its share: call it
        on every host); returns its path prefix (the manifest's path when sharded) on the chief."""
        if not self.is_chief and self.hosts == 1:
            return None
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.is_chief and not self.config_path.is_file():
            self.config_path.write_text(json.dumps(self.run_config, indent=2, sort_keys=True))
        step = int(self.step.read_value())
        self.data_sequences.assign(self.start_sequence + (step - self.start_step) * self.sequences_per_step)
        if self.hosts == 1:
            return self.manager.save(checkpoint_number=step, options=self.options)
        return self._save_share(step)

    def _save_share(self, step: int) -> str | None:
        """This host's share on disk, then (once every host's is) the chief's manifest; old ones removed."""
        shares = balanced_shares([int(tf.size(v)) * v.dtype.size for v in self.variables], self.hosts)
        prefix = self.directory / f"ckpt-{step}"
        written = True
        try:
            part = tf.train.Checkpoint(**{f"v{i}": self.variables[i] for i in shares[self.host]})
            part.write(f"{prefix}.share-{self.host}-of-{self.hosts}")
        except (OSError, tf.errors.OpError) as error:  # the others must still reach the collective below
            print(f"[checkpoint] host {self.host} could not write its share of step {step}: {error}", flush=True)
            written = False
        own = f"*.share-{self.host}-of-*"
        if not self.all_done(written):
            print(f"[checkpoint] step {step}: a host's share is missing, not published", flush=True)
            self._remove_before(step + 1, own, keep_from=step)  # this step's share alone: it is of no use
            return None
        self.published.append(step)
        oldest_kept = self.published[-self.keep] if len(self.published) >= self.keep else 0
        self._remove_before(oldest_kept, own)
        if not self.is_chief:
            return None
        manifest = {"step": step, "hosts": self.hosts, "shares": shares}
        temporary = prefix.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(manifest))
        temporary.replace(prefix.with_suffix(".json"))  # whole or not at all
        self._remove_before(oldest_kept, "*.json")
        return str(prefix.with_suffix(".json"))

    def _remove_before(self, step: int, pattern: str, keep_from: int = 0) -> None:
        """Deletes this host's ``ckpt-<s>`` + ``pattern`` files of steps keep_from <= s < step (old saves)."""
        for path in self.directory.glob(f"ckpt-{pattern}"):
            match = re.match(r"ckpt-(\d+)\.", path.name)
            if match and keep_from <= int(match[1]) < step:
                path.unlink()

    def wait(self) -> None:
        """Blocks until background writes are on disk."""
        self.checkpoint.sync()


def balanced_shares(sizes: list[int], hosts: int) -> list[list[int]]:
    """The indices of ``sizes`` in ``hosts`` shares of about equal bytes: largest first to the lightest share.

    e.g. sizes [8, 5, 4, 3], 2 hosts -> [[0, 3], [1, 2]] (11 and 9 bytes).
    """
    shares: list[list[int]] = [[] for _ in range(hosts)]
    loads = [0] * hosts
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        lightest = loads.index(min(loads))
        shares[lightest].append(i)
        loads[lightest] += sizes[i]
    return [sorted(share) for share in shares]
