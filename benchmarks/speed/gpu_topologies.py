"""NVIDIA GPU nodes to compile for without a GPU (the CUDA plugin's compile-only devices, as
MaxText's train_compile.py uses them). What the time model needs of them — peaks, memory, links —
is in hybrid_parallel/analysis/hardware.py.

`jax.experimental.topologies.get_topology_desc("", platform="cuda", target_config=TEXT,
topology="SLICES x HOSTS x GPUS")` needs only jax[cuda12] or jax[cuda13] installed — no GPU and no
driver, once JAX_SKIP_CUDA_CONSTRAINTS_CHECK lets the plugin load without one. TEXT describes the
GPU (an XLA `stream_executor.GpuTargetConfigProto`), written here from `Gpu` below; XLA keeps such
descriptions for its GPUs in its source tree (xla/backends/gpu/target_config/specs/), and a
GPU prints its own (the plugin asks a local GPU when no target_config is given).
"""

import dataclasses
import importlib.util
import os

import numpy as np
from jax.experimental import topologies

import benchmarks
from hybrid_parallel import platforms
from hybrid_parallel.analysis import costmodel, hardware, hlo_stats

# docs/gpu.json's one-GPU rows (H200, JAX 0.11.2, 2026-11-23): the compute rate of the predictions.
MEASURED = os.path.join(benchmarks.DOCS, "gpu.json")
# JAX takes this share of a GPU's memory for XLA unless XLA_PYTHON_CLIENT_MEM_FRACTION says more.
JAX_MEMORY_FRACTION = 0.75

# What a compute capability allows (the CUDA C++ Programming Guide's table of technical
# specifications per compute capability; XLA's specs of the A100 and V100 record the same).
_LIMITS = {
    "threads_per_block_limit": 1024, "threads_per_warp": 32,
    "shared_memory_per_block": 48 * 1024,  # without opting in
    "registers_per_core_limit": 65536, "registers_per_block_limit": 65536,
    "block_dim_limit_x": 2**31 - 1, "block_dim_limit_y": 65535, "block_dim_limit_z": 65535,
}
_BY_CAPABILITY = {  # shared memory per SM and per block opted in, threads per SM, FP32 cores per SM
    (9, 0): {"shared_memory_per_block_optin": 227 * 1024, "shared_memory_per_core": 228 * 1024,
             "threads_per_core_limit": 2048, "fpus_per_core": 128},
    (8, 9): {"shared_memory_per_block_optin": 99 * 1024, "shared_memory_per_core": 100 * 1024,
             "threads_per_core_limit": 1536, "fpus_per_core": 128},
    (8, 0): {"shared_memory_per_block_optin": 163 * 1024, "shared_memory_per_core": 164 * 1024,
             "threads_per_core_limit": 2048, "fpus_per_core": 64},
    (7, 0): {"shared_memory_per_block_optin": 96 * 1024, "shared_memory_per_core": 96 * 1024,
             "threads_per_core_limit": 2048, "fpus_per_core": 64},
}
# CUDA 13 compiles for compute capability 7.5 (Turing) and later: it dropped Maxwell, Pascal and
# Volta (CUDA 13.0's release notes). JAX's CUDA 12 plugin still compiles for 7.0.
CUDA13_OLDEST_CAPABILITY = (7, 5)


@dataclasses.dataclass(frozen=True)
class Gpu:
  """One GPU of a node, as its datasheet states it (memory size: as its driver reports it)."""
  name: str  # what the device kind reads
  sms: int
  clock_ghz: float  # boost clock
  memory_bytes: int  # what the driver reports: nvidia-smi's memory.total
  memory_bytes_per_s: float
  l2_bytes: int
  compute_capability: tuple[int, int] = (9, 0)

  def target_config(self) -> str:
    """The GpuTargetConfigProto text the CUDA plugin compiles for."""
    major, minor = self.compute_capability
    info = {**_LIMITS, **_BY_CAPABILITY[self.compute_capability], "core_count": self.sms,
            "clock_rate_ghz": self.clock_ghz, "device_memory_size": self.memory_bytes,
            "memory_bandwidth": int(self.memory_bytes_per_s), "l2_cache_size": self.l2_bytes}
    fields = "\n".join(f"  {key}: {value}" for key, value in info.items())
    return (f"gpu_device_info {{\n{fields}\n"
            f"  cuda_compute_capability {{\n    major: {major}\n    minor: {minor}\n  }}\n}}\n"
            f'platform_name: "CUDA"\n'
            f"dnn_version_info {{\n  major: 9\n  minor: 10\n  patch: 0\n}}\n"
            f'device_description_str: "{self.name}"\n')


# H100 SXM5 (NVIDIA's H100 datasheet): 132 SMs at 1.98 GHz, HBM3 at 3.35 TB/s, 50 MB L2. H200 SXM
# (NVIDIA's H200 datasheet): the same GH100 processor with HBM3e at 4.8 TB/s. Their memory as
# analysis/hardware.py records it.
GPUS = {
    "h100": Gpu("NVIDIA H100 80GB HBM3", 132, 1.98, int(hardware.H100.memory_bytes), 3.35e12,
                50 * 2**20),
    "h200": Gpu("NVIDIA H200", 132, 1.98, int(hardware.H200.memory_bytes), 4.8e12, 50 * 2**20),
}
# The GPUs a user may describe to benchmarks/choosing/choose_scheme.py besides. A100 SXM4 (XLA's
# a100_sxm_40 / a100_sxm_80 specs, as NVIDIA's A100 datasheet): 108 SMs at 1.41 GHz, 40 MB L2,
# HBM2 at 1,555 GB/s (40 GB) or HBM2e at 2,039 GB/s (80 GB). L4 (NVIDIA's L4 datasheet and Ada
# whitepaper): 58 SMs at 2.04 GHz, 48 MB L2, GDDR6 at 300 GB/s. V100 SXM2 16GB (XLA's v100 spec):
# 80 SMs at 1.53 GHz, 6 MB L2, HBM2 at 898 GB/s.
GPUS.update({
    "a100": Gpu("NVIDIA A100-SXM4-80GB", 108, 1.41, int(hardware.A100_80GB.memory_bytes),
                2039.04e9, 40 * 2**20, (8, 0)),
    "a100_40gb": Gpu("NVIDIA A100-SXM4-40GB", 108, 1.41, int(hardware.A100_40GB.memory_bytes),
                     1555.2e9, 40 * 2**20, (8, 0)),
    "l4": Gpu("NVIDIA L4", 58, 2.04, int(hardware.L4.memory_bytes), 300e9, 48 * 2**20, (8, 9)),
    "v100": Gpu("Tesla V100-SXM2-16GB", 80, 1.53, int(hardware.V100.memory_bytes), 898.048e9,
                6 * 2**20, (7, 0)),
})
# The GPUs benchmarks/speed/gpu_compile.py's published predictions are made for (docs/gpu.md).
STUDIED = ("h100", "h200")
# One node of 8 GPUs, and two such nodes (the hosts are the topology's processes).
TOPOLOGIES = ("1x1x8", "1x2x8")


def unavailable_reason(gpu: str | None = None) -> str | None:
  """Why compile-only GPU devices (of `gpu`, where given) cannot be made here, in one sentence;
  None where they can."""
  installed = [p for p in platforms.CUDA_PLUGINS if importlib.util.find_spec(p)]
  if not installed:
    return ("compiling for GPUs needs JAX's CUDA plugin (pip install -r requirements-cuda13.txt; "
            "no GPU needed)")
  if (gpu and GPUS[gpu].compute_capability < CUDA13_OLDEST_CAPABILITY
      and all("cuda13" in p for p in installed)):
    capability = ".".join(map(str, GPUS[gpu].compute_capability))
    return (f"JAX's CUDA 13 plugin, the one installed, does not compile for the "
            f"{GPUS[gpu].name}'s compute capability {capability} (CUDA 13 starts at 7.5; "
            f"requirements-cuda12.txt's plugin does)")
  return None


def topology_devices(gpu: str, topology: str) -> list:
  """The compile-only devices of `topology` ("1x1x8": slices × hosts × GPUs per host) of `gpu`
  ("h100", "h200"), in host order. Call before JAX starts its backends."""
  # The plugin checks the CUDA driver's version before it registers; there is no driver here.
  os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
  return list(topologies.get_topology_desc("", platform="cuda",
                                           target_config=GPUS[gpu].target_config(),
                                           topology=topology).devices)


def mesh_devices(devices: list, data: int, model: int) -> list:
  """The devices of a data × model mesh from a topology's (in host order). On two hosts, an
  equal share of each, in the mesh's row-major order — so the data axis crosses the hosts when
  it has a row per host or more, else the model axis does: the consecutive devices around the
  hosts' boundary (XLA:GPU compiles for consecutive device ids only). Otherwise the first."""
  n = data * model
  hosts = sorted({d.process_index for d in devices})
  if len(hosts) != 2 or n % 2:
    return devices[:n]
  boundary = sum(d.process_index == hosts[0] for d in devices)
  return devices[boundary - n // 2:boundary + n // 2]


def axes_crossing_hosts(mesh) -> list[str]:
  """The mesh axes along which devices of different hosts meet."""
  hosts = np.vectorize(lambda d: d.process_index)(mesh.devices)
  return [axis for i, axis in enumerate(mesh.axis_names)
          if (np.moveaxis(hosts, i, -1) != np.moveaxis(hosts, i, -1)[..., :1]).any()]


def crosses_hosts(collective, mesh) -> bool:
  """Whether a collective of a program compiled on `mesh` (an hlo_stats.Collective: its groups,
  or a permute's pairs, in the mesh's device order) joins devices of different hosts."""
  hosts = [d.process_index for d in mesh.devices.flat]
  return any(len({hosts[i] for i in group}) > 1 for group in collective.members)


def time_model_transfers(hlo: str, *, mesh, plan, arch, global_batch: int, image_size: int,
                         num_classes: int, dtype: str, owt_variant: str) -> list:
  """What costmodel.step_time prices for a program compiled on `mesh`: the program's own
  collectives — what each device sends, on the network where its groups cross hosts, hidden
  where a convolution or matrix product runs beside it (hlo_stats.overlapped). owt's (b)/(c)
  passes are priced by purpose instead (their model splits gradients from activations): the
  analytic minimum, which the compiled programs send (tests/gpu_compile_test.py), across the
  hosts along the mesh axes that cross them."""
  if costmodel.prices_owt_passes(plan, owt_variant):
    return costmodel.analytic_transfers(
        arch, plan, global_batch=global_batch, image_size=image_size, num_classes=num_classes,
        activation_bytes=2 if dtype == "bfloat16" else 4,
        crossing_axes=tuple(axes_crossing_hosts(mesh)))
  overlapped = hlo_stats.overlapped(hlo)
  return [costmodel.Transfer("program", "sent", sum(op.sent) / len(op.sent), len(op.sent),
                             crosses_hosts(op, mesh), op.name in overlapped)
          for op in hlo_stats.collectives(hlo, mesh.devices.size)]


def one_gpu_rows() -> list[dict]:
  return benchmarks.load_results(MEASURED)[1]["sections"]["single_device"]["result"]


def calibrated_node(gpu: str, topology: str, *, model: str, dtype: str,
                    measured: list[dict]) -> hardware.Machine:
  """The node(s) of `topology` with the one-GPU curve measured on an H200 (docs/gpu.json's bare
  step of the same model — or the two-column alexnet — and dtype): t(b) = t0 + b/r∞ through its
  batch-128 and batch-512 points gives the step's fixed time t0 and the FLOPs' share of the H200's
  peak. An H100 has the same processor: the same curve (up to 1.4× slower where memory-bound).
  Another GPU is given the same fixed time and the same share of its own peak: an assumption
  (none of them was measured here), which ranks schemes on it rather than timing them."""
  rows = {r["batch"]: r for r in measured if r["dtype"] == dtype and r["model"] == (
      model if any(m["model"] == model for m in measured) else "alexnet")}
  small, large = rows[128], rows[512]
  per_image = (large["step_ms"] - small["step_ms"]) / 1e3 / (512 - 128)
  overhead = small["step_ms"] / 1e3 - 128 * per_image
  hosts = int(topology.split("x")[1])
  h200 = dataclasses.replace(hardware.gpu_node("h200", nodes=hosts), step_overhead_s=overhead)
  h200 = h200.calibrated(flops_per_step=large["flops_per_image"] * 512,
                         seconds_per_step=large["step_ms"] / 1e3, dtype=dtype,
                         source=f"H200 {large['model']} {dtype}: batches 128 and 512")
  return dataclasses.replace(hardware.gpu_node(gpu, nodes=hosts), step_overhead_s=overhead,
                             efficiency=h200.efficiency, calibrated_from=h200.calibrated_from)


def without_sharded_autotuning() -> None:
  """No GPU to tune kernels on: XLA's sharded autotuning can hang a compile-only program
  (openxla/xla#28959; MaxText's train_compile.py turns it off too). Before JAX starts."""
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_gpu_shard_autotuning=false").strip()
