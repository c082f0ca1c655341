"""Usable device memory: the CUDA-reported size less the context and TensorFlow's reserve; every GPU type has a row."""

from __future__ import annotations

import pytest

from infra.estimate import hardware
from infra.instances import GPU_TRAINING_TYPES, INSTANCE_TYPES

GIB = 2**30


@pytest.mark.parametrize("name", GPU_TRAINING_TYPES)
def test_every_gpu_type_has_its_accelerator_and_less_usable_memory_than_marketed(name):
    instance = INSTANCE_TYPES[name]
    gpu = hardware.accelerator(instance)
    assert gpu.name == f"{instance.gpu_model}-{instance.gpu_memory_gib}GB"
    assert 0.8 * instance.gpu_memory_gib * GIB < hardware.usable_bytes(instance) < instance.gpu_memory_gib * GIB
    assert hardware.memory_gbps(instance) > 0 and 0 < hardware.matmul_efficiency(instance) < 1


def test_an_a100_40gb_gives_tensorflow_37_6_gib():
    """40,536 MiB as CUDA reports it - 512 MiB context - 1,536 MiB MinSystemMemory (compute capability 8)."""
    a100 = INSTANCE_TYPES["ml.p4d.24xlarge"]
    assert hardware.usable_bytes(a100) == (40_536 - 512 - 1_536) * 2**20
    assert round(hardware.usable_bytes(a100) / GIB, 2) == 37.59
    # TensorFlow's reserve by compute capability (gpu_device.cc): V100 1,050, A100 1,536, H100 1,800 MiB.
    reserves = [
        hardware.accelerator(INSTANCE_TYPES[n]).framework_reserve_mib
        for n in ("ml.p3.2xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge")
    ]
    assert reserves == [1_050, 1_536, 1_800]


def test_a_cpu_host_trains_in_its_memory_and_has_no_accelerator():
    host = INSTANCE_TYPES["ml.m5.xlarge"]
    assert hardware.accelerator(host) is None
    assert hardware.usable_bytes(host) == 16 * GIB
    assert hardware.intra_instance_gbps(host) == 0
    assert hardware.intra_instance_gbps(INSTANCE_TYPES["ml.g5.xlarge"]) == 0  # one GPU: nothing to reduce between
