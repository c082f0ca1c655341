"""SageMaker instance types this project knows, with the facts configuration checks need.

One table for validation now and for the pre-flight planner later: an unknown type is a
configuration error, not a failed job an hour into provisioning.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class InstanceType:
    """One SageMaker ML instance type.

    Args:
        name: the SageMaker name, e.g. ``ml.p4d.24xlarge``.
        vcpus: virtual CPUs.
        memory_gib: host memory.
        gpus: accelerators per instance (0 for CPU types).
        gpu_model: e.g. ``A100``; empty for CPU types.
        gpu_memory_gib: memory of one GPU.
    """

    name: str
    vcpus: int
    memory_gib: int
    gpus: int = 0
    gpu_model: str = ""
    gpu_memory_gib: int = 0

    @property
    def is_gpu(self) -> bool:
        return self.gpus > 0


_TABLE = [
    # GPU training types (AWS instance-type pages, November 2026).
    InstanceType("ml.p3.2xlarge", 8, 61, 1, "V100", 16),
    InstanceType("ml.p3.8xlarge", 32, 244, 4, "V100", 16),
    InstanceType("ml.p3.16xlarge", 64, 488, 8, "V100", 16),
    InstanceType("ml.p3dn.24xlarge", 96, 768, 8, "V100", 32),
    InstanceType("ml.p4d.24xlarge", 96, 1152, 8, "A100", 40),
    InstanceType("ml.p4de.24xlarge", 96, 1152, 8, "A100", 80),
    InstanceType("ml.p5.48xlarge", 192, 2048, 8, "H100", 80),
    InstanceType("ml.p5e.48xlarge", 192, 2048, 8, "H200", 141),
    InstanceType("ml.g5.xlarge", 4, 16, 1, "A10G", 24),
    InstanceType("ml.g5.2xlarge", 8, 32, 1, "A10G", 24),
    InstanceType("ml.g5.12xlarge", 48, 192, 4, "A10G", 24),
    InstanceType("ml.g5.48xlarge", 192, 768, 8, "A10G", 24),
    InstanceType("ml.g6e.xlarge", 4, 32, 1, "L40S", 48),
    InstanceType("ml.g6e.12xlarge", 48, 384, 4, "L40S", 48),
    InstanceType("ml.g6e.48xlarge", 192, 1536, 8, "L40S", 48),
    # CPU types for preprocessing, small training runs and hosting.
    InstanceType("ml.m5.large", 2, 8),
    InstanceType("ml.m5.xlarge", 4, 16),
    InstanceType("ml.m5.4xlarge", 16, 64),
    InstanceType("ml.m5.12xlarge", 48, 192),
    InstanceType("ml.m5.24xlarge", 96, 384),
    InstanceType("ml.c5.xlarge", 4, 8),
    InstanceType("ml.c5.4xlarge", 16, 32),
    InstanceType("ml.c5.9xlarge", 36, 72),
    InstanceType("ml.c5.18xlarge", 72, 144),
]

INSTANCE_TYPES: dict[str, InstanceType] = {t.name: t for t in _TABLE}
