"""What a training device really offers: the memory TensorFlow can allocate, and the rates the step-time model uses.

``instances.py`` has each instance type's marketed figures (a 40 GB A100, 312 TFLOPS). The estimate needs what
the framework gets of them, per GPU model and memory size:

- ``total_mib``: the device's memory as CUDA reports it (``cudaDeviceProp.totalGlobalMem``; PyTorch's
  ``get_device_properties().total_memory`` prints it), less than the marketed size: an A100-40GB reports 40,536
  MiB, not 40,960. Figures as printed by ``torch.cuda.get_device_properties`` in public logs (see ``SOURCES``).
- Usable = total - the CUDA context (``CUDA_CONTEXT_MIB``: 512 MiB, assumed: CUDA 12's lazily loaded context with
  cuBLAS/cuDNN handles is typically 300-600 MiB) - TensorFlow's own reserve. TensorFlow's GPU allocator takes
  the memory free after the context less ``MinSystemMemory`` (tensorflow/core/common_runtime/gpu/gpu_device.cc):
  1,050 MiB for compute capability 7.x (V100), 1,536 MiB for 8.x (A100, A10G, L40S), 1,800 MiB for 9.x (H100,
  H200). A100-40GB: 40,536 - 512 - 1,536 = 38,488 MiB = 37.6 GiB for tensors, not 40.
- ``hbm_gbps``: memory bandwidth, NVIDIA data sheets (GB/s).
- ``nvlink_gbps``: the all-reduce bus bandwidth NCCL reaches between the GPUs of one instance (GB/s; NVIDIA's
  nccl-tests definition, busbw): NVLink with NVSwitch on p4d (600 GB/s per GPU both ways, ~230 reached) and
  p5 (900 GB/s, ~360 reached), NVLink 2 on p3 (~130), PCIe only on g5 and g6e (~12). Assumed from published
  nccl-tests results, not measured here.
- ``matmul_efficiency``: the share of the bf16/fp16 tensor-core peak that cuBLAS reaches on GEMMs of GPT shapes
  (d >= 2048): assumed, from public GEMM benchmarks (A100 ~250 of 312 TFLOPS; H100 SXM ~650-700 of 989, power
  and clocks keep it further from its data-sheet peak); not measured here.
"""

from __future__ import annotations

import dataclasses

from infra.estimate.memory import GIB
from infra.instances import InstanceType

MIB = 2**20
CUDA_CONTEXT_MIB = 512  # assumed (module docstring)
MEMORY_EFFICIENCY = 0.8  # share of the HBM bandwidth a streaming (elementwise, softmax) kernel reaches; assumed


@dataclasses.dataclass(frozen=True)
class Accelerator:
    """One GPU model at one memory size.

    Args:
        name: e.g. ``A100-40GB``.
        total_mib: memory as CUDA reports it (``totalGlobalMem``), MiB.
        compute_capability: the major version (7 V100, 8 A100/A10G/L40S, 9 H100/H200).
        hbm_gbps: memory bandwidth, GB/s (data sheet).
        nvlink_gbps: NCCL all-reduce bus bandwidth inside one instance, GB/s (assumed, module docstring).
        matmul_efficiency: share of the 16-bit tensor-core peak reached by GEMMs (assumed, module docstring).
    """

    name: str
    total_mib: int
    compute_capability: int
    hbm_gbps: float
    nvlink_gbps: float
    matmul_efficiency: float

    @property
    def framework_reserve_mib(self) -> int:
        """TensorFlow's ``MinSystemMemory`` for this compute capability (devices of more than 2 GiB)."""
        return {7: 1050, 8: 1536}.get(self.compute_capability, 1800)

    @property
    def usable_bytes(self) -> int:
        """What TensorFlow's allocator can hand out: total - CUDA context - TensorFlow's reserve."""
        return (self.total_mib - CUDA_CONTEXT_MIB - self.framework_reserve_mib) * MIB


ACCELERATORS: dict[tuple[str, int], Accelerator] = {
    (gpu, gib): Accelerator(f"{gpu}-{gib}GB", *row)
    for (gpu, gib), row in {
        #  model, marketed GiB: total MiB, cc, HBM GB/s, NVLink busbw GB/s, GEMM efficiency
        ("V100", 16): (16_160, 7, 900, 130, 0.75),
        ("V100", 32): (32_510, 7, 900, 130, 0.75),
        ("A100", 40): (40_536, 8, 1_555, 230, 0.80),
        ("A100", 80): (81_251, 8, 2_039, 230, 0.80),
        ("H100", 80): (81_089, 9, 3_350, 360, 0.70),
        ("H200", 141): (143_156, 9, 4_800, 360, 0.70),
        ("A10G", 24): (22_587, 8, 600, 12, 0.80),
        ("L40S", 48): (45_589, 8, 864, 12, 0.70),
    }.items()
}

SOURCES = {
    "total_mib": (
        "torch.cuda.get_device_properties in public logs: A100-SXM4-40GB 40,536 MiB; H100 80GB HBM3 81,082-81,090; "
        "H200 143,156; Tesla V100-SXM2-16GB 16,160; A10G 22,587; L40S 45,589. A100-80GB: 81,251 (the PCIe and SXM4 "
        "parts as commonly printed; one log shows 81,920) and V100-32GB 32,510: not confirmed from here."
    ),
    "framework_reserve_mib": "tensorflow/core/common_runtime/gpu/gpu_device.cc, MinSystemMemory",
    "hbm_gbps": "NVIDIA data sheets (V100 900, A100-40GB 1,555, A100-80GB 2,039, H100 SXM 3,350, H200 4,800, "
    "A10G 600, L40S 864 GB/s)",
}


def accelerator(instance: InstanceType) -> Accelerator | None:
    """The GPU of ``instance``; None for CPU types."""
    if not instance.is_gpu:
        return None
    return ACCELERATORS[(instance.gpu_model, instance.gpu_memory_gib)]


def usable_bytes(instance: InstanceType) -> int:
    """Bytes one device can allocate for tensors: a GPU's usable memory, or the host's for CPU types."""
    gpu = accelerator(instance)
    return gpu.usable_bytes if gpu else instance.memory_gib * GIB


def memory_gbps(instance: InstanceType) -> float:
    """Memory bandwidth of one device, GB/s. CPU hosts: ~10 GB/s per vCPU pair's share (an estimate)."""
    gpu = accelerator(instance)
    return gpu.hbm_gbps if gpu else 5.0 * instance.vcpus


def intra_instance_gbps(instance: InstanceType) -> float:
    """NCCL all-reduce bus bandwidth between the devices of one instance, GB/s (0: one device)."""
    gpu = accelerator(instance)
    return gpu.nvlink_gbps if gpu and instance.gpus > 1 else 0.0


def matmul_efficiency(instance: InstanceType) -> float:
    """Share of the 16-bit peak the GEMMs reach; CPU peaks are estimates already, taken at 0.5."""
    gpu = accelerator(instance)
    return gpu.matmul_efficiency if gpu else 0.5
