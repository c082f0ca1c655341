"""Compiles an HLO micro-step from ``bench/hlo_export.py`` with jaxlib, without running it: the compile time and
the compiler's own account of the program's memory. No TensorFlow.

Targets: ``local``, jax's first device (this CPU, or the GPU where there is one), or a GPU of ``GPU_TARGETS``
compiled for without one: jax-cuda12-plugin's compile-only client, made from a ``GpuTargetConfigProto`` (the
device properties XLA's GPU compiler reads from the driver; ``jax.experimental.topologies.get_topology_desc``,
openxla/xla#16913), runs XLA's whole GPU pipeline (fusion, scheduling, buffer assignment) on this CPU. Without a
GPU it cannot autotune: each matmul gets cuBLAS's default algorithm, and its workspace may differ from a tuned one.

The memory (``memory_figures``) is XLA's buffer assignment, static: every buffer of the program has its place
before it runs. The temporaries are one allocation (XLA combines them), of ``temp`` bytes: the most that are live
at once in the compiler's schedule, as packed; the arguments (the tokens, the float32 weights, the loss scale)
and the results (the loss and every gradient) are allocations of their own, alive throughout, less what a result
shares with a donated argument (``alias``). So the program's peak is ``argument + output - alias + temp``, with
all of them held for the whole execution. On a GPU the machine code (a few MiB) is loaded beside it.

    .venv-jax/bin/python bench/hlo_compile.py build/hlo/gpt3-1.3b-bf16-b4-s2048.json --target a100-40gb
    .venv-jax/bin/python bench/hlo_compile.py build/hlo/tiny-bf16-b2-s128.json  # this machine's CPU

Prints one JSON line per HLO. ``--target`` other than local needs bench/requirements-jax.txt's CUDA plugin.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

import jax

# CUDA's device properties (cudaGetDeviceProperties) of each GPU the plan targets; XLA keeps a table of the same
# (xla/backends/gpu/target_config/specs). The prod plan's GPU (p4d's A100-SXM4-40GB) and the one this workplace lends.
GPU_TARGETS = {
    "a100-40gb": {"name": "NVIDIA A100-SXM4-40GB", "capability": (8, 0), "cores": 108, "fpus_per_core": 64,
                  "clock_ghz": 1.41, "memory": 42_331_013_120, "bandwidth": 1_555_200_000_000, "l2": 40 * 2**20,
                  "shared_per_core": 167_936, "shared_per_block_optin": 166_912},
    "h200": {"name": "NVIDIA H200 141GB HBM3e", "capability": (9, 0), "cores": 132, "fpus_per_core": 128,
             "clock_ghz": 1.98, "memory": 151_397_597_184, "bandwidth": 4_800_000_000_000, "l2": 50 * 2**20,
             "shared_per_core": 233_472, "shared_per_block_optin": 232_448},
}  # fmt: skip
TARGETS = ("local", *GPU_TARGETS)


def target_config(name: str) -> str:
    """The ``stream_executor.GpuTargetConfigProto`` (text) of a GPU of ``GPU_TARGETS``; the limits every NVIDIA
    GPU since Volta shares are written in (1,024 threads a block, 32 a warp, 64 Ki registers, 48 KiB of shared
    memory a block without opting in); cuDNN 9.10 and CUDA 12.8 as the runtime."""
    gpu = GPU_TARGETS[name]
    major, minor = gpu["capability"]
    return f"""gpu_device_info {{
  threads_per_block_limit: 1024 threads_per_warp: 32 shared_memory_per_block: 49152
  shared_memory_per_core: {gpu["shared_per_core"]} shared_memory_per_block_optin: {gpu["shared_per_block_optin"]}
  threads_per_core_limit: 2048 core_count: {gpu["cores"]} fpus_per_core: {gpu["fpus_per_core"]}
  block_dim_limit_x: 2147483647 block_dim_limit_y: 65535 block_dim_limit_z: 65535
  thread_dim_limit_x: 1024 thread_dim_limit_y: 1024 thread_dim_limit_z: 64
  memory_bandwidth: {gpu["bandwidth"]} l2_cache_size: {gpu["l2"]} clock_rate_ghz: {gpu["clock_ghz"]}
  device_memory_size: {gpu["memory"]} registers_per_core_limit: 65536 registers_per_block_limit: 65536
  cuda_compute_capability {{ major: {major} minor: {minor} }}
  device_vendor: "NVIDIA Corporation" name: "{gpu["name"]}" runtime_version: "12.8.0" dnn_version: "9.10.0"
}}
platform_name: "CUDA"
dnn_version_info {{ major: 9 minor: 10 }}
device_description_str: "{gpu["name"]}"
"""


def device(target: str) -> jax.Device:
    """The device to compile for: jax's first (``local``), or a compile-only one for a GPU of ``GPU_TARGETS``."""
    if target == "local":
        return jax.devices()[0]
    from jax.experimental import topologies

    try:
        topology = topologies.get_topology_desc(platform="cuda", target_config=target_config(target), topology="1x1x1")
    except Exception as error:  # no CUDA plugin: RuntimeError, or jaxlib's own error type
        raise SystemExit(f"--target {target} needs jax-cuda12-plugin (bench/requirements-jax.txt): {error}") from None
    return topology.devices[0]


def compile_hlo(hlo: bytes, target_device: jax.Device):
    """The serialized HLO module, converted to StableHLO and compiled for ``target_device``: loaded (runnable) on a
    real device, an unloaded executable on a compile-only one."""
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax, xla_client
    from jax._src.lib.mlir import ir

    stablehlo = xla_client._xla.mlir.hlo_to_stablehlo(hlo)
    client, options = target_device.client, xla_client.CompileOptions()
    if not isinstance(client, _jax.CompileOnlyPyClient):
        return client.compile_and_load(stablehlo, [target_device], options)
    with mlir.make_ir_context():
        module = ir.Module.parse(stablehlo)
        devices = xla_client.DeviceList((target_device,))
        return client.compile(module, executable_devices=devices, compile_options=options)


def memory_figures(executable) -> dict[str, int]:
    """The compiled program's buffers in bytes, and its peak, ``argument + output - alias + temp`` (module
    docstring). The machine code's size is the device's (0 from a compile-only client) or the host's."""
    stats = executable.get_compiled_memory_stats()
    figures = {kind: getattr(stats, f"{kind}_size_in_bytes") for kind in ("argument", "output", "alias", "temp")}
    figures["generated_code"] = stats.generated_code_size_in_bytes or stats.host_generated_code_size_in_bytes
    figures["peak"] = figures["argument"] + figures["output"] - figures["alias"] + figures["temp"]
    return figures


def compile_meta(meta_path: Path, target: str) -> dict:
    """Compiles the HLO beside ``meta_path`` (``hlo_export.py``'s JSON) for ``target``: its size, the compile time and
    the memory figures."""
    hlo = gzip.decompress(meta_path.with_suffix(".hlo.pb.gz").read_bytes())
    target_device = device(target)
    start = time.perf_counter()
    executable = compile_hlo(hlo, target_device)
    seconds = time.perf_counter() - start
    return {
        "name": meta_path.stem, "target": target, "device": target_device.device_kind, "jax": jax.__version__,
        "hlo_mib": round(len(hlo) / 2**20, 2), "compile_s": round(seconds, 1),
        "memory_bytes": memory_figures(executable),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", type=Path, nargs="+", help="the JSON(s) hlo_export.py wrote, the HLO beside each")
    parser.add_argument("--target", choices=TARGETS, default="local")
    args = parser.parse_args(argv)
    if "tensorflow" in sys.modules:
        raise SystemExit("hlo_compile.py must run without TensorFlow")
    if args.target != "local":
        jax.config.update("jax_platforms", "cpu")  # the CUDA plugin only for the compile-only topology
    for path in args.json:
        print(json.dumps(compile_meta(path, args.target)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
