"""Shared fixtures: each stage's template is synthesized once per test session."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from tests.synth import synth_template


@pytest.fixture(scope="session")
def dev_template() -> Template:
    return Template.from_json(synth_template("dev"))


@pytest.fixture(scope="session")
def prod_template() -> Template:
    return Template.from_json(synth_template("prod"))
