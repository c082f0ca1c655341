import os

import pytest
from rounds import Ratio, alternate, one_core, rate_ratio


def test_rounds_alternate_the_order_and_keep_each_measurement_apart():
    calls = []

    def measure(name: str, value: float):
        def run() -> float:
            calls.append(name)
            return value

        return run

    results = alternate(3, measure("a", 1.0), measure("b", 2.0), measure("c", 3.0))
    assert calls == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert results == [[1.0] * 3, [2.0] * 3, [3.0] * 3]


def test_the_ratio_is_the_median_round_not_the_ratio_of_the_bests():
    ratio = rate_ratio([10.0, 8.0, 12.0], [5.0, 4.0, 12.0])  # the bests' ratio would be 12 / 12 = 1.0
    assert ratio == Ratio([2.0, 2.0, 1.0])
    assert ratio.median == 2.0
    assert "median of 3 rounds, 1.000 to 2.000" in str(ratio)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="this system sets no CPU affinity (macOS)")
def test_one_core_pins_and_restores():
    cores = os.sched_getaffinity(0)
    with one_core() as placement:
        assert os.sched_getaffinity(0) == {max(cores)} and placement == f"on core {max(cores)}"
    assert os.sched_getaffinity(0) == cores


def test_one_core_pins_nothing_where_the_system_sets_no_affinity(monkeypatch):
    monkeypatch.delattr(os, "sched_setaffinity", raising=False)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    with one_core() as placement:
        assert placement == "unpinned (this system sets no CPU affinity)"
