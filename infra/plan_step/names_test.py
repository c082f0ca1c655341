from infra.plan_step.names import KINDS, MAX_NAME, endpoint_name, resource_names


def test_names_are_unique_per_execution_and_fit_sagemaker_limits():
    a = resource_names("gpt-dev", "2026-11-30_first run", "1a2b3c4d")
    b = resource_names("gpt-dev", "2026-11-30 first run", "1a2b3c4d")  # same slug, different name
    assert a["training"] != b["training"]
    assert a["training"].startswith("gpt-dev-2026-11-30-first-run-")
    long = resource_names("gpt-production", "x" * 80, "1a2b3c4d")
    for names in (a, b, long):
        assert set(names) == {*KINDS, "endpoint"}
        for name in names.values():
            assert len(name) <= MAX_NAME
            assert name[0].isalnum() and "--" not in name


def test_an_execution_name_used_again_after_a_redeploy_names_new_jobs():
    before, after = (resource_names("gpt-dev", "nightly", creation) for creation in ("1a2b3c4d", "9f8e7d6c"))
    assert all(before[kind] != after[kind] for kind in KINDS)  # SageMaker refuses a job name it has seen


def test_the_stage_has_one_endpoint_whatever_the_execution():
    names = {resource_names("gpt-prod", run, "1a2b3c4d")["endpoint"] for run in ("run1", "run2", "x" * 80)}
    assert names == {endpoint_name("gpt-prod")} == {"gpt-prod-endpoint"}
