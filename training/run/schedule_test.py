import itertools
import math

import pytest

from run.schedule import WarmupCosine


def test_warmup_is_linear_then_cosine_reaches_the_floor():
    schedule = WarmupCosine(peak=1e-3, warmup_steps=10, decay_steps=110, min_ratio=0.1)
    assert float(schedule(0)) == 0.0
    assert float(schedule(5)) == pytest.approx(5e-4)
    assert float(schedule(10)) == pytest.approx(1e-3)
    # Halfway through the decay the cosine term is 1/2: floor + (peak - floor) / 2.
    assert float(schedule(60)) == pytest.approx(1e-4 + 0.9e-3 * 0.5, rel=1e-5)
    assert float(schedule(110)) == pytest.approx(1e-4)
    assert float(schedule(500)) == pytest.approx(1e-4)
    values = [float(schedule(s)) for s in range(10, 111)]
    assert all(a >= b for a, b in itertools.pairwise(values))  # never rises after warm-up


def test_cosine_shape_at_a_quarter():
    schedule = WarmupCosine(peak=2.0, warmup_steps=0, decay_steps=100, min_ratio=0.0)
    assert float(schedule(25)) == pytest.approx(1.0 + math.cos(math.pi / 4), rel=1e-5)


def test_config_round_trip():
    schedule = WarmupCosine(peak=1e-3, warmup_steps=3, decay_steps=9, min_ratio=0.2)
    assert WarmupCosine(**schedule.get_config()).get_config() == schedule.get_config()
