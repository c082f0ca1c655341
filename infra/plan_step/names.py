"""Names of the SageMaker resources one execution creates, and the stage's one endpoint."""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 63  # SageMaker job, model and endpoint names
# What one execution creates, each named for it; the endpoint is the stage's (``endpoint_name``), updated in place.
KINDS = {
    "tokenizer": "tok",
    "shards": "shd",
    "training": "trn",
    "model": "mdl",
    "endpoint_config": "epc",
}


def endpoint_name(prefix: str) -> str:
    """The stage's endpoint: one, which each deploying execution creates or updates (``gpt-dev-endpoint``)."""
    return f"{prefix}-endpoint"


def resource_names(prefix: str, execution_name: str, stack_creation: str) -> dict[str, str]:
    """One name per kind, unique per execution and creation of the stack, within SageMaker's limits; and the
    stage's ``endpoint``.

    The execution's name, punctuation made dashes, and a short hash of the stack's creation
    (``StackSettings.stack_creation``) and the execution's name, which keeps two executions whose names differ only
    in punctuation or past the cut apart, and an execution name used again after the stack was destroyed and deployed
    anew (Step Functions accepts it again; SageMaker never accepts a job name twice).

    Example:
        >>> resource_names("gpt-dev", "2026-11-30_first run", "c1")["training"]
        'gpt-dev-2026-11-30-first-run-c56ce4-trn'
    """
    digest = hashlib.sha256(f"{stack_creation}/{execution_name}".encode()).hexdigest()[:6]
    slug = re.sub(r"[^A-Za-z0-9]+", "-", execution_name).strip("-")
    room = MAX_NAME - len(prefix) - len(digest) - 4 - 3  # 3 dashes and the longest kind suffix ("-shd" = 4)
    base = f"{prefix}-{slug[:room].strip('-')}-{digest}" if slug else f"{prefix}-{digest}"
    return {**{kind: f"{base}-{suffix}" for kind, suffix in KINDS.items()}, "endpoint": endpoint_name(prefix)}
