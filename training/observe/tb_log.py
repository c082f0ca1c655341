"""TensorBoard logs of the chief: every window's scalars and a profiler trace of a few steps.

Written under ``tensorboard_dir`` (``/opt/ml/output/tensorboard``, which the job's
TensorBoardOutputConfig uploads to S3 while it runs): ``train/`` and ``validation/`` scalars, and the
TensorFlow profiler's trace of steps ``profile_start`` .. ``profile_start + profile_steps - 1`` under
``train/plugins/profile/``. ``tensorboard --logdir <dir>`` or SageMaker's managed TensorBoard shows both.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import tensorflow as tf
from contract.health import Window

# What tf.summary.scalar writes, without the tensorboard package (the local venv has none): a float tensor
# tagged for TensorBoard's scalars plugin.
SCALAR = tf.compat.v1.SummaryMetadata(plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"))


def scalar(name: str, value: float) -> None:
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=SCALAR)


class TensorBoardLog:
    """Args: log_dir (None: write nothing), profile_start (first traced step), profile_steps (0: no trace)."""

    def __init__(self, log_dir: str | None, profile_start: int = 0, profile_steps: int = 0):
        self.dir = Path(log_dir) if log_dir else None
        self._first, self._last = profile_start, profile_start + profile_steps - 1
        self._profiling = False
        if self.dir:
            self._train = tf.summary.create_file_writer(str(self.dir / "train"))
            self._valid = tf.summary.create_file_writer(str(self.dir / "validation"))

    def before_step(self, step: int) -> None:
        if self.dir and step == self._first and self._last >= self._first:
            tf.profiler.experimental.start(str(self.dir / "train"))
            self._profiling = True

    def after_step(self, step: int) -> None:
        if self._profiling and step >= self._last:
            self.stop_profiler()

    def stop_profiler(self) -> None:
        if self._profiling:
            tf.profiler.experimental.stop()
            self._profiling = False

    def window(self, window: Window) -> None:
        if not self.dir:
            return
        with self._train.as_default(step=window.step):
            for field in dataclasses.fields(window):
                value = getattr(window, field.name)
                if field.name != "step" and value is not None:
                    scalar(field.name, float(value))
        self._train.flush()

    def validation(self, step: int, loss: float, sources: dict[str, float] | None = None) -> None:
        """The split's validation loss and, for a mix, each source's (``loss_<source>``)."""
        if self.dir:
            with self._valid.as_default(step=step):
                scalar("loss", loss)
                for source, source_loss in (sources or {}).items():
                    scalar(f"loss_{source}", source_loss)
            self._valid.flush()
