"""The stage's endpoint serves a model an earlier job trained, without training again; never one from elsewhere."""

from __future__ import annotations

import pytest

from infra.plan_step.plan import InputError, plan_execution
from local.folder_store import FolderStore

JOB = "gpt-dev-first-run-abc123-trn"
ARCHIVE = f"s3://models-bucket/training/{JOB}/output/model.tar.gz"


@pytest.fixture
def store(tmp_path) -> FolderStore:
    return FolderStore(tmp_path)  # no corpus, no dataset: nothing is read but the model


def test_deploy_from_skips_preprocessing_and_training_and_serves_that_jobs_model(settings, store):
    store.put_text(ARCHIVE, "archive")
    plan = plan_execution({"deploy_from": JOB}, "redeploy", settings, store)
    assert (plan["preprocess"]["run"], plan["stage_to_efs"], plan["train"], plan["deploy"]) == (
        False, False, False, True,
    )  # fmt: skip
    assert plan["requests"]["model"]["PrimaryContainer"]["ModelDataUrl"] == ARCHIVE
    assert plan["trained_earlier"]["ModelArtifacts"] == {"S3ModelArtifacts": ARCHIVE}
    assert plan["names"]["endpoint"] == "gpt-dev-endpoint"
    assert plan["requests"]["endpoint_update"] == {
        "EndpointName": "gpt-dev-endpoint",
        "EndpointConfigName": plan["names"]["endpoint_config"],
    }


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ("gpt-prod-first-run-abc123-trn", r"deploy_from: .* a training job of this stage, gpt-dev-\.\.\.-trn"),
        ("gpt-dev-first-run-abc123-shd", r"deploy_from: .* expected the name of a training job"),
        ("s3://elsewhere/model.tar.gz", r"deploy_from: .* expected the name of a training job"),
        (JOB, r"deploy_from: 'gpt-dev-first-run-abc123-trn' has no model at s3://models-bucket/training/"),
    ],
)
def test_deploy_from_refuses_a_job_of_another_stage_or_one_without_a_model(settings, store, job, message):
    with pytest.raises(InputError, match=message):
        plan_execution({"deploy_from": job}, "redeploy", settings, store)
