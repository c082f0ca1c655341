"""A run name is a checkpoint folder: an execution that names another run's folder resumes that run, or is refused.

The Plan step records what each run it plans trains (``run_record``: the model's shape, vocabulary and context, and
the dataset) at ``s3://<datasets>/inputs/runs/<run_name>.json``, beside its other records (the Plan function reads
and writes only its own JSON there; the checkpoints bucket is the training job's). A later execution with the same
``run_name`` is checked against it (``check_run``): another shape cannot restore those checkpoints (train.py would
stop at its start) and is refused; another dataset would continue their weights on other text, and is refused
unless the input says ``"resume": true``. A run planned before the record was kept is not checked.
"""

from __future__ import annotations

import json
from typing import Any

from infra.plan_step import requests
from infra.plan_step.execution_input import InputError, WorkflowInput
from infra.plan_step.object_store import ObjectStore
from infra.plan_step.settings import StackSettings

SHAPE_FIELDS = ("training.n_layer", "training.d_model", "training.n_head", "training.sequence_length", "vocab_size")


def run_record_uri(settings: StackSettings, run_name: str) -> str:
    return f"s3://{settings.datasets_bucket}/inputs/runs/{run_name}.json"


def run_record(settings: StackSettings, inp: WorkflowInput) -> dict[str, Any]:
    """What a run's checkpoints hold: the model's shape (as ``train.py``'s run_config.json checks it) and its data."""
    shape = inp.training.shape
    return {
        "training.n_layer": shape.n_layer,
        "training.d_model": shape.d_model,
        "training.n_head": shape.n_head,
        "training.sequence_length": inp.training.sequence_length,
        "vocab_size": inp.vocab_size,
        "dataset.name": requests.dataset_uri(settings, inp),
    }


def check_run(settings: StackSettings, inp: WorkflowInput, run_name: str, store: ObjectStore) -> None:
    """Raises InputError naming the run and each field where this execution differs from the run it would resume."""
    uri = run_record_uri(settings, run_name)
    if not store.list(uri):
        return
    recorded, planned = json.loads(store.read_bytes(uri)), run_record(settings, inp)
    differ = [f for f in planned if f in recorded and recorded[f] != planned[f]]
    shape = [f for f in differ if f in SHAPE_FIELDS]
    if not differ or (not shape and inp.resume):
        return
    shown = "; ".join(f"{f} {planned[f]} (run: {recorded[f]})" for f in differ)
    fix = "use another run_name" + ("" if shape else ', or "resume": true to continue its weights on this dataset')
    raise InputError(
        f"run_name: {run_name!r} is another run's checkpoint folder (s3://{settings.checkpoints_bucket}/{run_name}/), "
        f"which this execution would resume; it differs in {shown}: {fix}"
    )
