"""Peak memory of the training device per logging window: GPU 0's allocator, else this process on the host.

TensorFlow reserves most of a GPU's memory up front, so SageMaker's GPUMemoryUtilization reads near
full whatever the model needs; the allocator's peak is what the model really used.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys

import tensorflow as tf

MAXRSS_BYTES = 1 if sys.platform == "darwin" else 1024  # getrusage's ru_maxrss: bytes on macOS, KiB on Linux


def gpu_total_bytes() -> int | None:
    """GPU 0's memory from nvidia-smi; None without a GPU or the tool."""
    if not tf.config.list_physical_devices("GPU") or not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "--id=0"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
        return int(float(out.split()[0]) * 2**20)  # MiB
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


class PeakMemory:
    """Reads and resets the peak once per window: ``(peak bytes, share of the device's memory or None)``."""

    def __init__(self):
        self.on_gpu = bool(tf.config.list_physical_devices("GPU"))
        self.total = gpu_total_bytes() if self.on_gpu else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def read(self) -> tuple[int, float | None]:
        if self.on_gpu:
            peak = tf.config.experimental.get_memory_info("GPU:0")["peak"]
            tf.config.experimental.reset_memory_stats("GPU:0")
        else:  # the process's high-water mark since it started; it cannot be reset
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * MAXRSS_BYTES
        return peak, (peak / self.total if self.total else None)
