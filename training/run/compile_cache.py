"""XLA's compilations kept across processes: TensorFlow's persistent compilation cache, in the checkpoint folder.

Without it every process compiles the step again, each spot restart included. TensorFlow keeps a compiled
cluster on disk when ``TF_XLA_FLAGS`` has ``--tf_xla_persistent_cache_directory=DIR`` (``tensorflow/compiler/jit``:
``flags.cc``; ``device_compiler.h``'s ``CompileStrict`` looks for an entry before it compiles, and writes one
after): one file per compiled cluster, ``<prefix>__<signature hash>__<HLO hash>__<device type>.pb``, which holds
the HLO and the serialized executable. It is written under a temporary name and then renamed
(``device_executable_persistor.h``, ``SaveSerializedEntry``; TF 2.21 does this, seen here with strace). An entry
that is there but does not load makes the step fail instead of compiling again: a file cut short fails with "Read
less bytes than requested" (tried here on TF 2.21). So the cache is read only from a place where files arrive
whole.

Where: ``<checkpoint_dir>/xla-cache``. SageMaker uploads the checkpoint folder to S3 as it changes, and before a
restarted job starts it downloads the folder to every host, so a spot restart finds the compiled steps there. A
folder on the instance's disk would not survive the move to a new instance.

- One writer. With several hosts, each would upload the same file names to the same S3 prefix (SageMaker asks for
  distinct names), so only the first host writes and the others read (``--tf_xla_persistent_cache_read_only``).
  Every host compiles the same clusters for the same GPU, so the first host's entries serve all of them.
- The prefix names the TensorFlow version and the instance type (``SM_CURRENT_INSTANCE_TYPE``). The key holds the
  HLO's hash and the device type (``XLA_GPU_JIT``), not the compiler that made the binary nor the GPU it is for, so
  a new image, or a job resumed on another instance type, compiles again rather than load another XLA's executable
  or another GPU's machine code.
- Temporary files left by a write that was killed (``*.tmp``) are removed before TensorFlow starts.

The flags are read once, when TensorFlow first compiles, so ``train.py`` calls ``configure`` before it imports
TensorFlow. Flags already in ``TF_XLA_FLAGS`` are kept; a cache directory already given there is left as it is.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from collections.abc import Mapping, MutableMapping
from pathlib import Path

FOLDER = "xla-cache"
FLAG = "--tf_xla_persistent_cache_directory"


def cache_prefix(env: Mapping[str, str] = os.environ) -> str:
    """The file-name prefix of this process's entries: ``tf-2.21.0-ml.p4d.24xlarge``, the version from the metadata
    of the package that installs ``tensorflow`` (tensorflow, tensorflow-cpu, ...) without importing it, the
    instance type from SageMaker's ``SM_CURRENT_INSTANCE_TYPE`` (``local`` elsewhere)."""
    packages = importlib.metadata.packages_distributions().get("tensorflow") or []
    versions = [importlib.metadata.version(name) for name in packages if name.lower().startswith(("tensorflow", "tf"))]
    parts = ["tf", versions[0] if versions else "unknown", env.get("SM_CURRENT_INSTANCE_TYPE") or "local"]
    return re.sub(r"[^0-9A-Za-z.-]", "_", "-".join(parts))


def configure(checkpoint_dir: str | Path, *, writer: bool, env: MutableMapping[str, str] = os.environ) -> Path | None:
    """Points TensorFlow's persistent XLA cache at ``<checkpoint_dir>/xla-cache`` through ``env["TF_XLA_FLAGS"]``
    (``writer``: whether this host writes entries); returns the folder, or None where ``TF_XLA_FLAGS`` already
    names a cache directory. Call it before TensorFlow is imported.

    Example:
        >>> env = {"TF_XLA_FLAGS": "--tf_xla_auto_jit=0"}
        >>> configure("/opt/ml/checkpoints", writer=False, env=env)
        PosixPath('/opt/ml/checkpoints/xla-cache')
        >>> env["TF_XLA_FLAGS"].split()[2]
        '--tf_xla_persistent_cache_read_only=true'
    """
    flags = env.get("TF_XLA_FLAGS", "")
    if FLAG in flags:
        return None
    folder = Path(checkpoint_dir) / FOLDER
    if writer:
        folder.mkdir(parents=True, exist_ok=True)
        for partial in folder.glob("*.tmp"):
            partial.unlink(missing_ok=True)
    added = [f"{FLAG}={folder}", f"--tf_xla_persistent_cache_read_only={str(not writer).lower()}",
             f"--tf_xla_persistent_cache_prefix={cache_prefix(env)}"]  # fmt: skip
    env["TF_XLA_FLAGS"] = " ".join([flags, *added] if flags else added)
    return folder
