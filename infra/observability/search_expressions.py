"""CloudWatch SEARCH expressions: the only way to chart metrics of jobs whose names are unknown at deploy time.

A search returns one line per matching time series (at most 500 per graph) and cannot drive an alarm.
Syntax: ``SEARCH('{Namespace,Dim1,...} SearchTerms', 'Statistic', Period)``; names with characters other than
letters and digits are double-quoted, and ``"``, ``\\``, ``(`` and ``)`` are escaped inside quotes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

TRAINING_NAMESPACE = "/aws/sagemaker/TrainingJobs"
PROCESSING_NAMESPACE = "/aws/sagemaker/ProcessingJobs"
STATISTICS = ("Average", "Sum", "Minimum", "Maximum", "SampleCount")
MAX_QUERY = 1024  # characters between the single quotes


def quote(name: str) -> str:
    """``name`` as an exact-match term: double-quoted, with CloudWatch's escapes."""
    return '"' + re.sub(r'(["\\()])', r"\\\1", name) + '"'


def _schema_name(name: str) -> str:
    return name if name.isalnum() else quote(name)


def search(
    namespace: str,
    dimensions: Sequence[str],
    metric: str | None,
    *,
    statistic: str = "Average",
    period: int = 60,
    partial: dict[str, str] | None = None,
) -> str:
    """One line per series of ``metric`` in ``namespace`` with exactly ``dimensions``.

    Args:
        metric: the metric's name, an exact match; None: any metric (``partial={"MetricName": token}`` narrows it).
        partial: dimension -> token a value must contain, e.g. ``{"Host": "gpt-dev"}`` keeps this stack's jobs
            (a partial match: the value's tokens ``gpt``, ``dev`` must appear one after the other).
        period: seconds, a multiple of 60.

    Example:
        ``search(TRAINING_NAMESPACE, ["Host"], "GPUUtilization", partial={"Host": "gpt-dev"})`` is
        ``SEARCH('{"/aws/sagemaker/TrainingJobs",Host} MetricName="GPUUtilization" Host=gpt-dev', 'Average', 60)``.
    """
    if statistic not in STATISTICS:
        raise ValueError(f"statistic {statistic!r}: expected one of {', '.join(STATISTICS)}")
    if period <= 0 or period % 60:
        raise ValueError(f"period {period}: expected a positive multiple of 60 seconds")
    schema = ",".join(_schema_name(n) for n in (namespace, *dimensions))
    terms = [f"MetricName={quote(metric)}"] if metric is not None else []
    for dimension, token in (partial or {}).items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*", token):
            raise ValueError(f"partial match {token!r}: expected letters, digits and '-'")
        terms.append(f"{dimension}={token}")
    query = "{" + schema + "} " + " ".join(terms)
    if len(query) > MAX_QUERY:
        raise ValueError(f"search query of {len(query)} characters: at most {MAX_QUERY}")
    return f"SEARCH('{query}', '{statistic}', {period})"
