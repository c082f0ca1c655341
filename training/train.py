"""SageMaker entry point: pre-train a GPT decoder on token shards, data-parallel across hosts.

SageMaker runs ``python train.py --name value ...`` in this folder (hyperparameters also in SM_HPS);
locally run the same with ``--train_dir <dataset>`` etc. ``python train.py --help`` lists every
hyperparameter. The run:

    1. checks TensorFlow's and Keras' versions, the channels, tokenizer, vocabulary and sequence length (no compute
       spent yet); points XLA's persistent compilation cache at <checkpoint_dir>/xla-cache before TensorFlow
       starts (run/compile_cache.py), so a restarted job loads the compiled steps instead of compiling them again
    2. creates the engine (MultiWorkerMirroredStrategy, MirroredStrategy, default or Horovod API)
    3. builds the model and AdamW, restores the newest checkpoint if any
    4. trains max_steps steps: [train] lines, [valid] lines, checkpoints
    5. exports a SavedModel + tokenizer to SM_MODEL_DIR and prints a [sample]

SIGTERM (a stop, a spot reclaim) checkpoints the step in flight on every worker and exits 143, without exporting.

A fatal error is written to <output_dir>/failure (SageMaker shows it as the failure reason) and the
process exits 1.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

from contract.hparams import parse_args
from run import compile_cache
from run.job import cluster


class TrainingError(RuntimeError):
    """A condition that stops training with a message for the operator."""


def write_failure(output_dir: str | Path, message: str) -> None:
    """SageMaker's convention: the text of <output_dir>/failure becomes the job's FailureReason."""
    try:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        (Path(output_dir) / "failure").write_text(message)
    except OSError as error:
        print(f"[error] could not write {output_dir}/failure: {error}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None, env=os.environ) -> int:
    args = parse_args(argv, env)
    if "tensorflow" not in sys.modules:  # TensorFlow reads the flags once: too late in a process that runs it already
        hosts, current, _ = cluster(env)
        compile_cache.configure(args.checkpoint_dir, writer=current == hosts[0])
    try:
        return run(args, env)
    except Exception as error:
        message = f"{type(error).__name__}: {error}"
        write_failure(args.output_dir, message + "\n\n" + traceback.format_exc())
        print(f"[error] {message}", file=sys.stderr, flush=True)
        return 1


def run(args, env) -> int:
    """Trains and exports; after a SIGTERM, checkpoints and returns STOPPED_EXIT_CODE without exporting."""
    from run.loop import TrainingRun  # imports TensorFlow: after argument parsing, so --help is fast
    from run.stop_signal import STOPPED_EXIT_CODE
    from run.versions import check_versions

    check_versions()
    training = TrainingRun(args, env)
    training.train()
    if training.stopped_at is None:
        training.finish()
    training.leave_together()
    return 0 if training.stopped_at is None else STOPPED_EXIT_CODE


if __name__ == "__main__":
    sys.exit(main())
