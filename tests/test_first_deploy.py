"""What only AWS checks when the stack is first created, checked on the synthesized template.

cfn-lint and cdk-nag pass templates that CloudFormation then fails to create: a Lambda environment over 4 KB,
a resource created before what it needs exists. These tests hold the template to those rules.
"""

from __future__ import annotations

import json

import pytest

from tests.longest_values import LongestValues
from tests.synth import synth_template

STAGES = ("dev", "prod")
# Lambda: "The total size of the set of environment variables cannot exceed 4 KB", measured as the JSON of the
# Variables map (CreateFunction's InvalidParameterValueException quotes that "String measured").
LAMBDA_ENVIRONMENT_BYTES = 4096


def lambda_environment(template: dict, logical_id: str) -> str:
    """The string Lambda measures, with every reference at its longest."""
    variables = template["Resources"][logical_id]["Properties"].get("Environment", {}).get("Variables", {})
    return json.dumps(LongestValues(template).value(variables), separators=(",", ":"))


@pytest.mark.parametrize("stage", STAGES)
def test_every_function_environment_fits_lambdas_4_kb_with_every_reference_at_its_longest(stage: str):
    template = synth_template(stage)
    functions = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::Lambda::Function"]
    sizes = {k: len(lambda_environment(template, k).encode()) for k in functions}
    assert sizes and all(size <= LAMBDA_ENVIRONMENT_BYTES for size in sizes.values()), sizes
