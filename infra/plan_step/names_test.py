from infra.plan_step.names import KINDS, MAX_NAME, resource_names


def test_names_are_unique_per_execution_and_fit_sagemaker_limits():
    a = resource_names("gpt-dev", "2026-11-30_first run")
    b = resource_names("gpt-dev", "2026-11-30 first run")  # same slug, different name
    assert a["training"] != b["training"]
    assert a["training"].startswith("gpt-dev-2026-11-30-first-run-")
    long = resource_names("gpt-production", "x" * 80)
    for names in (a, b, long):
        assert set(names) == set(KINDS)
        for name in names.values():
            assert len(name) <= MAX_NAME
            assert name[0].isalnum() and "--" not in name
