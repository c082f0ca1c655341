"""The Debugger rule image table covers every region the stack can be deployed to."""

from __future__ import annotations

import pytest

from infra.config import REGIONS
from infra.observability.rule_images import RULE_REGISTRIES, rule_evaluator_image


def test_every_supported_region_has_a_rule_image():
    assert set(REGIONS) <= set(RULE_REGISTRIES)
    for account in RULE_REGISTRIES.values():
        assert len(account) == 12 and account.isdigit()


def test_rule_image_uri_names_the_regional_registry():
    assert (
        rule_evaluator_image("us-east-1")
        == "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"
    )
    assert rule_evaluator_image("eu-west-1").startswith("929884845733.dkr.ecr.eu-west-1.amazonaws.com/")


def test_an_unknown_region_is_an_error_not_a_guess():
    with pytest.raises(KeyError):
        rule_evaluator_image("mars-north-1")
