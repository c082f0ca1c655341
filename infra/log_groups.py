"""CloudWatch log groups of the stack: encrypted with the data key, with the stage's retention."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import LOG_RETENTION_DAYS, StorageConfig

_R = logs.RetentionDays
RETENTION = dict(
    zip(
        LOG_RETENTION_DAYS,
        (
            _R.ONE_DAY,
            _R.THREE_DAYS,
            _R.FIVE_DAYS,
            _R.ONE_WEEK,
            _R.TWO_WEEKS,
            _R.ONE_MONTH,
            _R.TWO_MONTHS,
            _R.THREE_MONTHS,
            _R.FOUR_MONTHS,
            _R.FIVE_MONTHS,
            _R.SIX_MONTHS,
            _R.ONE_YEAR,
            _R.THIRTEEN_MONTHS,
            _R.EIGHTEEN_MONTHS,
            _R.TWO_YEARS,
            _R.THREE_YEARS,
            _R.FIVE_YEARS,
            _R.SIX_YEARS,
            _R.SEVEN_YEARS,
            _R.EIGHT_YEARS,
            _R.NINE_YEARS,
            _R.TEN_YEARS,
        ),
        strict=True,
    )
)


def encrypted_log_group(
    scope: Construct, id: str, *, key: kms.IKey, config: StorageConfig, name: str | None = None
) -> logs.LogGroup:
    """A log group with the stage's retention, encrypted with ``key``, kept or removed with the data; ``name``
    (default: one CloudFormation generates) must differ for each creation of the stack where data is kept."""
    return logs.LogGroup(
        scope,
        id,
        log_group_name=name,
        retention=RETENTION[config.log_retention_days],
        encryption_key=key,
        removal_policy=cdk.RemovalPolicy.RETAIN if config.retain_data else cdk.RemovalPolicy.DESTROY,
    )
