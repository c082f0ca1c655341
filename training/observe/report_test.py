import math

from contract.health import Verdict
from contract.health_test import window

from observe.metrics import Evaluation
from observe.report import line_chart, render, round_ticks, tick_label, write_report


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


def test_ticks_are_round_multiples_of_1_2_or_5_times_a_power_of_ten_covering_the_data():
    assert round_ticks(10, 250) == [0, 50, 100, 150, 200, 250]
    assert round_ticks(3.6, 7.55) == [3, 4, 5, 6, 7, 8]
    assert round_ticks(6.67e-4, 2e-3) == [0.0005, 0.001, 0.0015, 0.002]
    assert round_ticks(0.12, 0.27) == [0.1, 0.15, 0.2, 0.25, 0.3]
    assert round_ticks(5.0, 5.0) == [5.0, 5.1] and round_ticks(0, 0) == [0, 1]  # a flat line still gets an axis
    for low, high in [(0.0013, 0.0071), (17, 9_431), (-3.2, 41), (1e6, 1.07e7)]:
        ticks = round_ticks(low, high)
        spacing = ticks[1] - ticks[0]
        mantissa = spacing / 10 ** math.floor(math.log10(spacing))
        assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-9 and ticks[0] <= low and ticks[-1] >= high
        assert all(abs(t / spacing - round(t / spacing)) < 1e-9 for t in ticks) and len(ticks) <= 7
    assert [tick_label(t, [0, 500_000, 1_000_000]) for t in (0, 500_000, 1_000_000)] == ["0", "0.5M", "1M"]
    assert tick_label(0.0015, [0.001, 0.0015]) == "0.0015" and tick_label(250, [200, 250]) == "250"
    assert tick_label(1.5e6, [1.5e6]) == "1.5M"  # a lone tick (a tokens axis clipped to the steps' range)


def test_loss_chart_has_a_tokens_axis_and_validation_error_bars():
    validation = [(10, Evaluation(4.9, 0.05, 64)), (20, Evaluation(4.5, 0.04, 64))]
    text = render("r", [window(10, 5), window(20, 4)], validation, [], tokens_per_step=4096)
    loss_chart = text.split("<svg")[1]
    assert ">tokens</text>" in loss_chart and ">80k</text>" in loss_chart  # 20 steps x 4096 tokens = 81,920
    assert loss_chart.count('class="error-bar"') == 2 and text.count('class="error-bar"') == 2
    assert ">tokens</text>" not in render("r", [window(10, 5)], validation, [])


def test_a_mix_gets_a_chart_and_table_rows_per_source():
    def mixed(step, web_bpb):
        sources = {"web": Evaluation(4.6, 0.06, 32, web_bpb, 0.02), "code": Evaluation(3.1, 0.05, 32)}
        return step, Evaluation(4.5, 0.04, 64, 1.2, 0.01, sources)

    validation = [mixed(10, 1.4), mixed(20, 1.3)]
    text = render("r", [window(10, 5), window(20, 4)], validation, [], (20, validation[-1][1]))
    charts = text.split("<svg")[1:]
    assert len(charts) == 8 and "Validation: code" in charts[6] and "Validation: web" in charts[7]
    assert ">bits per byte ± s.e.</text>" in charts[7] and charts[7].count('class="error-bar"') == 2
    assert ">loss ± s.e.</text>" in charts[6]  # code's bytes unknown: its loss
    assert "<td>sample: web</td><td>20</td><td>32</td><td>4.6000 ± 0.0600</td><td>99.48</td><td>1.3000 ± 0.0200" in text
    assert "<td>whole split: code</td><td>20</td><td>32</td><td>3.1000 ± 0.0500</td>" in text
