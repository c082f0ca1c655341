import dataclasses

from infra.aws_limits import from_botocore, write_limits
from infra.instances import INSTANCE_TYPES


def test_botocore_limits_of_the_apis_the_workflow_calls():
    limits = from_botocore()
    assert limits.processing_instance_count == (1, 100)
    assert (limits.hyperparameters, limits.hyperparameter_key_chars, limits.hyperparameter_value_chars) == (
        100,
        256,
        2500,
    )
    assert limits.container_argument_chars == 256
    assert (limits.container_arguments, limits.processing_inputs, limits.metric_definitions) == (100, 10, 40)
    assert "ml.p3dn.24xlarge" in limits.training_instance_types
    assert "ml.p3dn.24xlarge" not in limits.hosting_instance_types  # a training-only type
    assert set(INSTANCE_TYPES) <= set(limits.training_instance_types)


def test_bundled_limits_read_back_equal(tmp_path, monkeypatch):
    import infra.aws_limits as module

    write_limits(tmp_path / "aws_limits.json")
    monkeypatch.setattr(module, "LIMITS_FILE", tmp_path / "aws_limits.json")
    module.aws_limits.cache_clear()
    try:
        assert dataclasses.asdict(module.aws_limits()) == dataclasses.asdict(from_botocore())
    finally:
        module.aws_limits.cache_clear()
