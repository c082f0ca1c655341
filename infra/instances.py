"""SageMaker instance types this project knows, with the facts configuration checks and the estimate need.

One table for validation and for the pre-flight estimate (``infra/estimate``): an unknown type is a
configuration error, not a failed job an hour into provisioning. Standard library only: the workflow's
Plan step (a Lambda function) imports it.

Sources and confidence:

- GPUs, GPU memory, vCPUs, host memory, network: the AWS instance-type pages (EC2 accelerated computing,
  SageMaker instance types), November 2026.
- Peak FLOPs: NVIDIA data sheets, dense (no structured sparsity), per GPU. ``peak_tflops_16bit`` is the bf16/fp16
  tensor-core rate; ``peak_tflops_fp32`` is the rate TensorFlow gets for float32 matmuls, which on Ampere and
  newer is TF32 on tensor cores (TensorFlow's default). The A10G is AWS's variant of the A10 with about
  half the A10's tensor rate (70 vs 125 TFLOPS); its figure is the least certain of the GPU rows.
- CPU peaks are estimates: 16 fp32 lanes x 2 FMA units x 2 FLOPs x ~2.5 GHz (AVX-512) per core,
  i.e. about 80 GFLOPS per vCPU (two vCPUs share a core); the estimate uses them only for CPU training runs.
- Prices: SageMaker *training* on-demand, us-east-1, USD per instance-hour, as listed on the SageMaker
  pricing page and transcribed in public price tables read in September 2026 (``PRICES_AS_OF``); this machine
  has no network, so they were not re-read at the source. P4 and P5 prices reflect AWS's 2025 price cut
  for those families. ``price_is_estimate`` marks rows with no listed SageMaker price found: p3dn is the EC2
  price ($31.212) plus SageMaker's usual ~15% premium, p5e the p5 price plus 15%. Spot is an estimate too
  (``SPOT_DISCOUNT``).
"""

from __future__ import annotations

import dataclasses

PRICES_AS_OF = "2026-09"
PRICES_REGION = "us-east-1"
SPOT_DISCOUNT = 0.65
"""Estimated saving of managed spot over on-demand (SageMaker advertises "up to 90%"; 60-70% is typical for
g5/p3, less for scarce p4/p5 capacity). An estimate, not a price: actual spot prices move by the hour."""


@dataclasses.dataclass(frozen=True)
class InstanceType:
    """One SageMaker ML instance type.

    Args:
        name: the SageMaker name, e.g. ``ml.p4d.24xlarge``.
        vcpus: virtual CPUs.
        memory_gib: host memory.
        gpus: accelerators per instance (0 for CPU types).
        gpu_model: e.g. ``A100``; empty for CPU types.
        gpu_memory_gib: memory of one GPU (as marketed: 40 for an A100-40GB).
        peak_tflops_16bit: dense bf16/fp16 peak of one GPU (of the whole host for CPU types).
        peak_tflops_fp32: float32 peak of one GPU (TF32 tensor cores where TensorFlow uses them).
        network_gbps: network bandwidth of the instance ("up to" figures taken at face value).
        price_per_hour: on-demand SageMaker training price in USD, us-east-1, as of ``PRICES_AS_OF``.
        price_is_estimate: no listed SageMaker price was found; the figure is derived (see the module docstring).
    """

    name: str
    vcpus: int
    memory_gib: int
    gpus: int = 0
    gpu_model: str = ""
    gpu_memory_gib: int = 0
    peak_tflops_16bit: float = 0.0
    peak_tflops_fp32: float = 0.0
    network_gbps: float = 10.0
    price_per_hour: float = 0.0
    price_is_estimate: bool = False

    @property
    def is_gpu(self) -> bool:
        return self.gpus > 0

    @property
    def supports_bf16(self) -> bool:
        """V100 has no bfloat16; CPUs run it (emulated or with AVX512_BF16)."""
        return self.gpu_model != "V100"

    @property
    def devices(self) -> int:
        """Training devices: one per GPU, or the whole host for CPU types."""
        return max(self.gpus, 1)

    @property
    def device_memory_gib(self) -> int:
        """Memory one device trains in: a GPU's, or the host's for CPU types."""
        return self.gpu_memory_gib if self.is_gpu else self.memory_gib

    def peak_flops(self, precision: str) -> float:
        """Peak FLOP/s of one device in ``precision`` (bf16, fp16 or fp32)."""
        return 1e12 * (self.peak_tflops_fp32 if precision == "fp32" else self.peak_tflops_16bit)

    @property
    def spot_price_per_hour(self) -> float:
        """On-demand price less the estimated spot discount."""
        return self.price_per_hour * (1 - SPOT_DISCOUNT)


def _gpu(name, vcpus, memory, gpus, model, gpu_memory, tf16, tf32, gbps, price, estimate=False) -> InstanceType:
    return InstanceType(name, vcpus, memory, gpus, model, gpu_memory, tf16, tf32, gbps, price, estimate)


def _cpu(name: str, vcpus: int, memory: int, gbps: float, price: float) -> InstanceType:
    peak = vcpus * 0.08  # ~80 GFLOPS per vCPU, an estimate (module docstring)
    return InstanceType(name, vcpus, memory, 0, "", 0, peak, peak, gbps, price)


# Peak TFLOPS per GPU, dense: V100 125 fp16 / 15.7 fp32; A100 312 / 156 (TF32); H100 and H200 (SXM) 989 / 495;
# A10G 70 / 35; L40S 362 / 183.
_TABLE = [
    #    name                vCPU  GiB  GPUs model  GiB/GPU  16-bit  fp32  Gbps   $/hour
    _gpu("ml.p3.2xlarge", 8, 61, 1, "V100", 16, 125, 15.7, 10, 3.825),
    _gpu("ml.p3.8xlarge", 32, 244, 4, "V100", 16, 125, 15.7, 10, 14.688),
    _gpu("ml.p3.16xlarge", 64, 488, 8, "V100", 16, 125, 15.7, 25, 28.152),
    _gpu("ml.p3dn.24xlarge", 96, 768, 8, "V100", 32, 125, 15.7, 100, 35.894, estimate=True),
    _gpu("ml.p4d.24xlarge", 96, 1152, 8, "A100", 40, 312, 156, 400, 25.2513),
    _gpu("ml.p4de.24xlarge", 96, 1152, 8, "A100", 80, 312, 156, 400, 31.5641),
    _gpu("ml.p5.48xlarge", 192, 2048, 8, "H100", 80, 989, 495, 3200, 63.296),
    _gpu("ml.p5e.48xlarge", 192, 2048, 8, "H200", 141, 989, 495, 3200, 72.79, estimate=True),
    _gpu("ml.g5.xlarge", 4, 16, 1, "A10G", 24, 70, 35, 10, 1.408),
    _gpu("ml.g5.2xlarge", 8, 32, 1, "A10G", 24, 70, 35, 10, 1.515),
    _gpu("ml.g5.12xlarge", 48, 192, 4, "A10G", 24, 70, 35, 40, 7.09),
    _gpu("ml.g5.48xlarge", 192, 768, 8, "A10G", 24, 70, 35, 100, 20.36),
    _gpu("ml.g6e.xlarge", 4, 32, 1, "L40S", 48, 362, 183, 20, 2.61),
    _gpu("ml.g6e.12xlarge", 48, 384, 4, "L40S", 48, 362, 183, 100, 13.12),
    _gpu("ml.g6e.48xlarge", 192, 1536, 8, "L40S", 48, 362, 183, 400, 37.66),
    # CPU types for preprocessing, small training runs and hosting.
    _cpu("ml.m5.large", 2, 8, 10, 0.115),
    _cpu("ml.m5.xlarge", 4, 16, 10, 0.23),
    _cpu("ml.m5.4xlarge", 16, 64, 10, 0.922),
    _cpu("ml.m5.12xlarge", 48, 192, 12, 2.765),
    _cpu("ml.m5.24xlarge", 96, 384, 25, 5.53),
    _cpu("ml.c5.xlarge", 4, 8, 10, 0.204),
    _cpu("ml.c5.4xlarge", 16, 32, 10, 0.816),
    _cpu("ml.c5.9xlarge", 36, 72, 12, 1.836),
    _cpu("ml.c5.18xlarge", 72, 144, 25, 3.672),
]

INSTANCE_TYPES: dict[str, InstanceType] = {t.name: t for t in _TABLE}
GPU_TRAINING_TYPES: tuple[str, ...] = tuple(t.name for t in _TABLE if t.is_gpu)
CPU_TRAINING_TYPES: tuple[str, ...] = tuple(t.name for t in _TABLE if not t.is_gpu)
