"""Which accelerators this machine has, by the probes JAX makes before it opens one (its private
hardware_utils module, read in source and written out here, since private modules are not for
import): a Google TPU on the PCI bus, the device files of an NVIDIA GPU (a Linux host, Docker,
WSL2), AMD's KFD driver. Standard library only: the notebook asks before anything is installed
(notebooks/runtime.py), platforms.py before JAX starts a backend."""

import glob
import os
import re

_GOOGLE_PCI_VENDOR = "0x1ae0"
_NVIDIA_DEVICE_FILES = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg")
_AMD_KFD_NODES = "/sys/class/kfd/kfd/topology/nodes/*/properties"


def _read(path: str) -> str:
  try:
    with open(path) as f:
      return f.read()
  except OSError:
    return ""


def google_tpu_chips() -> int:
  """How many PCI functions of Google's (TPU chips) the bus lists."""
  return sum(_read(vendor).strip() == _GOOGLE_PCI_VENDOR
             for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"))


def _amd_gpus() -> int:
  """How many of the KFD driver's nodes compute (a GPU's have SIMD units; a CPU's none)."""
  return sum(int(m.group(1)) > 0 for path in glob.glob(_AMD_KFD_NODES)
             for m in [re.search(r"\bsimd_count\s+(\d+)", _read(path))] if m)


def nvidia_gpu() -> bool:
  """Whether an NVIDIA GPU's device files are here."""
  return any(os.path.exists(path) for path in _NVIDIA_DEVICE_FILES)


def only_the_cpu_can_run() -> bool:
  """Whether this machine has no TPU chip and no GPU, by the probes JAX makes before it opens an
  accelerator: the PCI bus, the NVIDIA device files, the AMD driver."""
  return google_tpu_chips() == 0 and not nvidia_gpu() and _amd_gpus() == 0


