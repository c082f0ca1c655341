"""EFS metrics of the datasets file system, and its throughput as a share of what it is permitted.

``efs.FileSystem`` has no ``.metric()``; these are built from ``AWS/EFS`` by ``FileSystemId``. EFS reports
``MeteredIOBytes`` (bytes moved per period) and ``PermittedThroughput`` (bytes per second the file system may
drive now: the Elastic or provisioned limit, or the burst rate); metric math turns them into MiB/s and %.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw

MIB = 1_048_576


def efs_metric(file_system_id: str, name: str, statistic: str, period: cdk.Duration, **dimensions: str) -> cw.Metric:
    """One ``AWS/EFS`` metric of the file system (extra dimensions, e.g. ``StorageClass="Total"``)."""
    return cw.Metric(
        namespace="AWS/EFS",
        metric_name=name,
        dimensions_map={"FileSystemId": file_system_id, **dimensions},
        statistic=statistic,
        period=period,
    )


def _io_and_permitted(file_system_id: str, period: cdk.Duration) -> dict[str, cw.IMetric]:
    return {
        "io": efs_metric(file_system_id, "MeteredIOBytes", "Sum", period),
        "permitted": efs_metric(file_system_id, "PermittedThroughput", "Maximum", period),
    }


def throughput_mibps(file_system_id: str, period: cdk.Duration) -> cw.MathExpression:
    """Throughput the jobs drive, in MiB/s: bytes per period / period length."""
    return cw.MathExpression(
        expression=f"io / PERIOD(io) / {MIB}",
        using_metrics={"io": efs_metric(file_system_id, "MeteredIOBytes", "Sum", period)},
        label="Throughput (MiB/s)",
        period=period,
    )


def permitted_mibps(file_system_id: str, period: cdk.Duration) -> cw.MathExpression:
    """The file system's current throughput limit, in MiB/s."""
    return cw.MathExpression(
        expression=f"permitted / {MIB}",
        using_metrics={"permitted": efs_metric(file_system_id, "PermittedThroughput", "Maximum", period)},
        label="Permitted (MiB/s)",
        period=period,
    )


def throughput_percent(file_system_id: str, period: cdk.Duration) -> cw.MathExpression:
    """Throughput as a percentage of the permitted throughput (what the alarm watches)."""
    return cw.MathExpression(
        expression="100 * (io / PERIOD(io)) / permitted",
        using_metrics=_io_and_permitted(file_system_id, period),
        label="Throughput (% of permitted)",
        period=period,
    )
