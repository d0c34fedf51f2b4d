"""Which platform JAX runs on, decided once per process before its backends start.

Every entry point — main.py, each benchmark, the notebook — calls `start` before anything queries
the devices:

* the user's choice (JAX_PLATFORMS, or jax_platforms set earlier) is obeyed as it stands;
* on a machine with no accelerator JAX is told to use the CPU, so that an installed libtpu or CUDA
  plugin (which compile for TPU and GPU topologies without the hardware) is never opened: JAX
  would otherwise try it first and print libtpu's five lines of complaints, or the CUDA plugin's
  traceback, before settling on the CPU;
* NVIDIA GPUs that this JAX cannot use (no CUDA plugin installed) are named, with the install
  command that would use them: JAX itself falls back to the CPU with one easily missed line;
* the CPU backend simulates `cpu_devices` devices, the stand-ins for a mesh larger than the
  machine (it affects nothing where accelerators run the mesh).
"""

import glob
import importlib.util
import os
import re
import subprocess

from absl import logging

# The CUDA plugins of jax[cuda12] / jax[cuda13]: without one, jaxlib has no GPU backend.
CUDA_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin")


def start(*, cpu_devices: int | None = None) -> None:
  """Sets JAX's platform and CPU device count (module docstring); call before the first device
  query. Returns nothing and starts no backend (jax.distributed may still initialise after)."""
  import jax
  if cpu_devices:
    jax.config.update("jax_num_cpu_devices", cpu_devices)
  if jax.config.jax_platforms:  # the user's choice needs no advice.
    return
  cuda = any(importlib.util.find_spec(plugin) for plugin in CUDA_PLUGINS)
  if (cuda or importlib.util.find_spec("libtpu")) and only_the_cpu_can_run():
    jax.config.update("jax_platforms", "cpu")
  gpus = nvidia_gpus()
  if gpus and not cuda:
    logging.warning("%s present, but this jaxlib has no CUDA backend and JAX runs on the CPU; "
                    "for the GPU: pip install -r requirements-cuda12.txt (or -cuda13.txt).",
                    " and ".join(gpus))


def nvidia_gpus() -> list[str]:
  """The NVIDIA GPUs `nvidia-smi -L` lists (none where it is missing or fails)."""
  try:
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
  except (OSError, subprocess.SubprocessError):
    return []
  return [line.split(" (UUID")[0] for line in listed.stdout.splitlines()
          if listed.returncode == 0 and line.startswith("GPU ")]


# What JAX itself looks for before it opens an accelerator (its private hardware_utils module,
# read in source and written out here, since private modules are not for import): a Google TPU
# on the PCI bus, the device files of an NVIDIA GPU (a Linux host, Docker, WSL2), AMD's KFD driver.
_GOOGLE_PCI_VENDOR = "0x1ae0"
_NVIDIA_DEVICE_FILES = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg")
_AMD_KFD_NODES = "/sys/class/kfd/kfd/topology/nodes/*/properties"


def _read(path: str) -> str:
  try:
    with open(path) as f:
      return f.read()
  except OSError:
    return ""


def _google_pci_devices() -> int:
  """How many PCI functions of Google's (TPU chips) the bus lists."""
  return sum(_read(vendor).strip() == _GOOGLE_PCI_VENDOR
             for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"))


def _amd_gpus() -> int:
  """How many of the KFD driver's nodes compute (a GPU's have SIMD units; a CPU's none)."""
  return sum(int(m.group(1)) > 0 for path in glob.glob(_AMD_KFD_NODES)
             for m in [re.search(r"\bsimd_count\s+(\d+)", _read(path))] if m)


def only_the_cpu_can_run() -> bool:
  """Whether this machine has no TPU chip and no GPU, by the probes JAX makes before it opens an
  accelerator: the PCI bus, the NVIDIA device files, the AMD driver."""
  return (_google_pci_devices() == 0
          and not any(os.path.exists(path) for path in _NVIDIA_DEVICE_FILES)
          and _amd_gpus() == 0)


