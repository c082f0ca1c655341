"""Names of the SageMaker resources one execution creates, derived from the execution's name."""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 63  # SageMaker job, model and endpoint names
KINDS = {
    "tokenizer": "tok",
    "shards": "shd",
    "training": "trn",
    "model": "mdl",
    "endpoint_config": "epc",
    "endpoint": "ep",
}


def resource_names(prefix: str, execution_name: str) -> dict[str, str]:
    """One name per kind, unique per execution and within SageMaker's limits.

    The execution's name, punctuation made dashes, and a short hash of it, which keeps two executions whose names
    differ only in punctuation or past the cut apart.

    Example:
        >>> resource_names("gpt-dev", "2026-11-30_first run")["training"]
        'gpt-dev-2026-11-30-first-run-e375b7-trn'
    """
    digest = hashlib.sha256(execution_name.encode()).hexdigest()[:6]
    slug = re.sub(r"[^A-Za-z0-9]+", "-", execution_name).strip("-")
    room = MAX_NAME - len(prefix) - len(digest) - 4 - 3  # 3 dashes and the longest kind suffix ("-shd" = 4)
    base = f"{prefix}-{slug[:room].strip('-')}-{digest}" if slug else f"{prefix}-{digest}"
    return {kind: f"{base}-{suffix}" for kind, suffix in KINDS.items()}
