"""A deployed stage stays operable: its names are its own, its alarms reach a person, its VPC overlaps no other's."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, load_stage_config
from infra.config.sections import default_cidr
from tests.synth import cli_context

EMAIL = {"notification_email": "ml-oncall@corp.internal.co"}


def load(name: str, stage: dict, account: str | None = None, **others: dict):
    return load_stage_config({"stage": name, "stages": {name: stage, **others}}, default_account=account)


def test_a_stage_name_with_a_hyphen_is_refused_for_its_names_would_begin_another_stages():
    with pytest.raises(ConfigError, match=r"stage: 'prod-eu' is not valid; expected lower-case letters and digits.*"
                       r"gpt-NAME-\*, which stage NAME-x's names would match too\), e.g. prodeu"):  # fmt: skip
        load("prod-eu", EMAIL)
    assert load("prodeu", EMAIL).job_prefix == "gpt-prodeu"


def test_a_stage_other_than_dev_names_who_receives_its_alarms_or_why_nobody_does():
    with pytest.raises(ConfigError, match=r"notification_email: None is not valid; expected an address that receives "
                       r"stage staging's alarms.*or observability.unsubscribed_reason"):  # fmt: skip
        load("staging", {})
    assert load("dev", {}).notification_email is None
    reason = {"observability": {"unsubscribed_reason": "a sandbox account that an hourly job sweeps"}}
    assert load("staging", reason).observability.unsubscribed_reason
    with pytest.raises(ConfigError, match=r"unsubscribed_reason: .* expected no reason while notification_email"):
        load("staging", {**EMAIL, **reason})
    with pytest.raises(ConfigError, match=r"unsubscribed_reason: 'none' is not valid; expected why nobody"):
        load("staging", {"observability": {"unsubscribed_reason": "none"}})


def test_a_reserved_address_synthesizes_offline_but_a_real_account_is_refused_it():
    placeholder = {"notification_email": "ml-alerts@example.com"}
    assert load("prod", placeholder).notification_email == "ml-alerts@example.com"  # cdk.json's prod, offline
    refusal = r"'ml-alerts@example.com' .* a person reads: example.com is reserved .* account 210987654321's alarms"
    with pytest.raises(ConfigError, match=refusal):
        load("prod", placeholder, account="210987654321")
    assert load("prod", EMAIL, account="210987654321").account == "210987654321"


def test_the_vpc_range_is_a_stage_setting_and_no_two_stages_of_cdk_json_share_one():
    context = cli_context()
    ranges = {name: load_stage_config({**context, "stage": name}).vpc_cidr for name in context["stages"]}
    assert ranges == {"dev": "10.21.0.0/16", "prod": "10.20.0.0/16"}
    assert default_cidr("staging") != default_cidr("stagingb")  # a default for each name
    assert load("staging", EMAIL).vpc_cidr == default_cidr("staging")
    same = {**EMAIL, "network": {"cidr": "10.20.0.0/16"}}
    with pytest.raises(ConfigError, match=r"network.cidr: '10.20.0.0/16' .* no other stage uses: stage prod has"):
        load("staging", same, prod={"network": {"cidr": "10.20.0.0/16"}})


@pytest.mark.parametrize("cidr", ["10.20.0.0/24", "8.8.0.0/16", "10.20.0.1/16", "ten", "--cidr"])
def test_a_vpc_range_that_is_not_a_private_16_is_refused(cidr: str):
    with pytest.raises(ConfigError, match=r"network.cidr: .* expected a private /16"):
        load("dev", {"network": {"cidr": cidr}})


def test_the_budget_is_a_number_of_dollars_a_month_or_none():
    assert load("dev", {}).observability.monthly_budget_usd == 1000
    assert load("dev", {"observability": {"monthly_budget_usd": 0}}).observability.monthly_budget_usd == 0
    with pytest.raises(ConfigError, match=r"monthly_budget_usd: -5 is not valid; expected 0 \(no budget\)"):
        load("dev", {"observability": {"monthly_budget_usd": -5}})
