"""SEARCH expressions: quoting, partial matches and the limits CloudWatch enforces."""

from __future__ import annotations

import pytest

from infra.observability.search_expressions import PROCESSING_NAMESPACE, TRAINING_NAMESPACE, quote, search


def test_namespace_with_slashes_is_quoted_and_metric_is_an_exact_match():
    assert search(TRAINING_NAMESPACE, ["Host"], "GPUUtilization", partial={"Host": "gpt-dev"}) == (
        "SEARCH('{\"/aws/sagemaker/TrainingJobs\",Host} MetricName=\"GPUUtilization\" Host=gpt-dev', 'Average', 60)"
    )


def test_metric_names_with_punctuation_stay_exact_and_statistic_and_period_are_kept():
    expression = search(PROCESSING_NAMESPACE, ["Host"], "train:loss", statistic="Maximum", period=300)
    assert expression == "SEARCH('{\"/aws/sagemaker/ProcessingJobs\",Host} MetricName=\"train:loss\"', 'Maximum', 300)"


def test_quote_escapes_what_cloudwatch_requires():
    assert quote('a"b\\c(d)') == '"a\\"b\\\\c\\(d\\)"'


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"statistic": "Mean"}, "statistic 'Mean'"),
        ({"period": 90}, "multiple of 60"),
        ({"period": 0}, "multiple of 60"),
        ({"partial": {"Host": "gpt dev"}}, "letters, digits and '-'"),
        ({"partial": {"Host": "x'); DROP"}}, "letters, digits and '-'"),
    ],
)
def test_invalid_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        search(TRAINING_NAMESPACE, ["Host"], "CPUUtilization", **kwargs)


def test_query_longer_than_cloudwatch_allows_is_refused():
    with pytest.raises(ValueError, match="at most 1024"):
        search(TRAINING_NAMESPACE, ["Host"], "x" * 1000)
