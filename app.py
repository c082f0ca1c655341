#!/usr/bin/env python3
"""The CDK app's entry point (``cdk.json`` runs it): ``cdk synth -c stage=dev [-c config=overrides.json]``."""

import os
import sys

import aws_cdk as cdk

from infra.app import CONTEXT_KEYS, build_app
from infra.config import ConfigError, load_stage_config

app = cdk.App()
try:
    config = load_stage_config(
        {key: app.node.try_get_context(key) for key in CONTEXT_KEYS},
        default_account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
    )
except ConfigError as error:
    sys.exit(f"Invalid configuration: {error}")
build_app(app, config)
app.synth()
