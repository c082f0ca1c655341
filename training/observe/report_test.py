import math

from contract.health import Verdict
from contract.health_test import window

from observe.metrics import Evaluation
from observe.report import line_chart, write_report


def test_chart_draws_one_line_per_series_and_skips_non_finite_points():
    svg = line_chart("Loss", {"a": [(1, 2.0), (2, math.nan), (3, 1.0)], "b": [(1, 3.0)]})
    assert svg.count("<polyline") == 2 and "nan" not in svg
    assert "no data" in line_chart("Empty", {"a": []})


def test_report_has_every_plot_and_every_verdict_with_advice_for_problems(tmp_path):
    results = [
        Verdict("input-bound", False, "38% of step time waiting", "raise prefetch"),
        Verdict("stalled", True, "1 s"),
    ]
    validation = [(10, Evaluation(4.9, 0.05, 64)), (20, Evaluation(4.5, 0.04, 64))]
    split = (20, Evaluation(4.4, 0.02, 1_200))
    path = write_report(tmp_path, "Training report: <job>", [window(10, 5), window(20, 4)], validation, results, split)
    text = path.read_text()
    assert "<td>sample</td><td>20</td><td>64</td><td>4.5000 ± 0.0400</td><td>90.02</td>" in text
    assert "<td>whole split</td><td>20</td><td>1,200</td><td>4.4000 ± 0.0200</td><td>81.45</td>" in text
    assert text.count("<svg") == 6 and "&lt;job&gt;" in text
    for title in ("Loss", "Tokens per second", "Model FLOPs utilization", "Step time split", "Learning rate", "norm"):
        assert title in text
    assert '<td class="PROBLEM">PROBLEM</td><td>38% of step time waiting</td><td>raise prefetch</td>' in text
    assert '<td class="ok">ok</td><td>1 s</td><td></td>' in text
