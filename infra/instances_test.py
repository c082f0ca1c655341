"""The instance table: the types the estimate needs, with the facts it reads."""

from __future__ import annotations

import re

import pytest

from infra.instances import GPU_TRAINING_TYPES, INSTANCE_TYPES, PRICES_AS_OF, SPOT_DISCOUNT

REQUIRED_GPU_TYPES = [
    "ml.p3.16xlarge",
    "ml.p3dn.24xlarge",
    "ml.p4d.24xlarge",
    "ml.p4de.24xlarge",
    "ml.p5.48xlarge",
    "ml.p5e.48xlarge",
    "ml.g5.12xlarge",
    "ml.g5.48xlarge",
    "ml.g6e.48xlarge",
]


@pytest.mark.parametrize("name", REQUIRED_GPU_TYPES)
def test_training_types_have_gpus_peaks_network_and_a_price(name):
    t = INSTANCE_TYPES[name]
    assert name in GPU_TRAINING_TYPES
    assert t.gpus in (4, 8) and t.gpu_memory_gib >= 16
    assert t.peak_tflops_16bit > t.peak_tflops_fp32 > 0
    assert t.network_gbps >= 25 and t.price_per_hour > 0


def test_cpu_types_for_preprocessing_are_priced_and_train_on_the_host():
    t = INSTANCE_TYPES["ml.c5.9xlarge"]
    assert not t.is_gpu and t.devices == 1 and t.device_memory_gib == 72
    assert t.peak_flops("fp32") == pytest.approx(36 * 0.08e12)
    assert all(INSTANCE_TYPES[n].price_per_hour > 0 for n in INSTANCE_TYPES)


def test_newer_gpus_have_more_memory_and_flops_and_bf16_except_v100():
    a100, h100, h200 = (INSTANCE_TYPES[n] for n in ("ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge"))
    assert a100.peak_flops("bf16") < h100.peak_flops("bf16") == h200.peak_flops("bf16")
    assert h100.gpu_memory_gib < h200.gpu_memory_gib
    assert not INSTANCE_TYPES["ml.p3.16xlarge"].supports_bf16 and a100.supports_bf16


def test_prices_are_dated_and_spot_is_a_discount():
    assert re.fullmatch(r"20\d\d-\d\d", PRICES_AS_OF)
    assert 0 < SPOT_DISCOUNT < 1
    p4d = INSTANCE_TYPES["ml.p4d.24xlarge"]
    assert p4d.spot_price_per_hour == pytest.approx(p4d.price_per_hour * (1 - SPOT_DISCOUNT))
