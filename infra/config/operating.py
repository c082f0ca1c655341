"""The checks that keep a deployed stage operable: its alarms reach a person, its network is its own, its spend
has a ceiling."""

from __future__ import annotations

import ipaddress
from typing import Any

from infra.config.sections import PLACEHOLDER_ACCOUNT, ConfigError, StageConfig, default_cidr

MIN_REASON_CHARACTERS = 20
MAX_BUDGET_USD = 10_000_000
# Domains that receive no mail by definition (RFC 2606 and RFC 6761): an address there reaches nobody.
RESERVED_DOMAINS = ("example.com", "example.net", "example.org")
RESERVED_SUFFIXES = (".example", ".test", ".invalid", ".localhost")
PRIVATE_RANGES = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


def validate_operations(config: StageConfig) -> None:
    """Raises ConfigError naming the setting when the stage's alarms would reach nobody, its VPC range is not a
    private /16, or its budget is out of range."""
    _check_subscriber(config)
    _check_cidr(config.network.cidr)
    budget = config.observability.monthly_budget_usd
    if not 0 <= budget <= MAX_BUDGET_USD:
        raise ConfigError(
            "observability.monthly_budget_usd", budget, f"0 (no budget) to {MAX_BUDGET_USD:,} US dollars a month"
        )


def _check_subscriber(config: StageConfig) -> None:
    """Every stage but dev e-mails a person, or says why not; a placeholder address only where nothing deploys."""
    email, reason = config.notification_email, config.observability.unsubscribed_reason.strip()
    field = "observability.unsubscribed_reason"
    if email and reason:
        raise ConfigError(field, reason, "no reason while notification_email is set")
    if reason and not MIN_REASON_CHARACTERS <= len(reason) <= 500:
        raise ConfigError(field, reason, f"why nobody is e-mailed, {MIN_REASON_CHARACTERS} to 500 characters")
    if config.name != "dev" and not email and not reason:
        raise ConfigError(
            "notification_email",
            None,
            f"an address that receives stage {config.name}'s alarms, failures and budget warnings (every stage but "
            f"dev has one), or {field} saying why nobody is e-mailed",
        )
    domain = email.rsplit("@", 1)[-1].lower() if email else ""
    reserved = domain in RESERVED_DOMAINS or domain.endswith(RESERVED_SUFFIXES)
    if reserved and config.account != PLACEHOLDER_ACCOUNT:
        raise ConfigError(
            "notification_email",
            email,
            f"an address a person reads: {domain} is reserved and receives no mail (RFC 2606), so account "
            f"{config.account}'s alarms would reach nobody",
        )


def _check_cidr(cidr: str | None) -> None:
    if cidr is None:
        return
    try:
        network = ipaddress.ip_network(cidr)
    except ValueError:
        network = None
    if network is None or network.prefixlen != 16 or not any(network.subnet_of(r) for r in PRIVATE_RANGES):
        raise ConfigError("network.cidr", cidr, "a private /16 such as 10.40.0.0/16 (the subnets are /20s)")


def check_distinct_networks(config: StageConfig, stages: dict[str, Any]) -> None:
    """The stage's VPC range overlaps no other stage's of cdk.json (their ``network.cidr`` or default), so that
    any two can be peered or share a transit gateway."""
    mine = ipaddress.ip_network(config.vpc_cidr)
    for name, entry in sorted(stages.items()):
        if name == config.name:
            continue
        network = entry.get("network") if isinstance(entry, dict) else None
        cidr = network.get("cidr") if isinstance(network, dict) else None
        try:
            theirs = ipaddress.ip_network(cidr or default_cidr(name))
        except (TypeError, ValueError):
            continue  # that stage's own load says what is wrong with it
        if mine.overlaps(theirs):
            raise ConfigError(
                "network.cidr", config.vpc_cidr, f"a range no other stage uses: stage {name} has {theirs}"
            )
