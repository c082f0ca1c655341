"""The endpoint's part of the plan: the stage's one endpoint serves the model this execution trains, or the model
an earlier training job of the stage made (``deploy_from``: nothing is preprocessed or trained again)."""

from __future__ import annotations

import re
from typing import Any

from infra.config import ConfigError
from infra.plan_step.execution_input import WorkflowInput
from infra.plan_step.names import KINDS, MAX_NAME
from infra.plan_step.object_store import ObjectStore
from infra.plan_step.requests import model_artifact_uri
from infra.plan_step.settings import StackSettings
from infra.training_code import training_module


def check_deploy_from(settings: StackSettings, inp: WorkflowInput, store: ObjectStore) -> None:
    """``deploy_from`` names a training job of this stage whose model archive is in the stack's models bucket: a
    model archive is a program (its code/ runs in the serving container), so none from elsewhere is served."""
    job = inp.deploy_from
    if job is None:
        return
    pattern = rf"{re.escape(settings.job_prefix)}-[A-Za-z0-9-]+-{KINDS['training']}"
    if len(job) > MAX_NAME or not re.fullmatch(pattern, job):
        raise ConfigError(
            "deploy_from",
            job,
            f"the name of a training job of this stage, {settings.job_prefix}-...-{KINDS['training']} (the success "
            "e-mail's model path names it)",
        )
    uri = model_artifact_uri(settings, job)
    if not store.list(uri):
        shown = training_module("hparams").shown(job)
        raise ConfigError.sentence(
            "deploy_from", f"{shown} has no model at {uri}: name a training job of this stage that completed"
        )


def trained_earlier(settings: StackSettings, job: str) -> dict[str, Any]:
    """What the workflow reads of a finished training job (``$.training.Job``), for a model trained earlier."""
    return {
        "TrainingJobName": job,
        "ModelArtifacts": {"S3ModelArtifacts": model_artifact_uri(settings, job)},
        "FinalMetricDataList": [],
        "TrainingTimeInSeconds": f"0 (deployed the model {job} trained)",
        "BillableTimeInSeconds": "0",
    }
