"""Which accelerators this machine has, by the probes JAX makes before it opens one (its private
hardware_utils module, read in source and written out here, since private modules are not for
import): TPU chips on the PCI bus, known by Google's vendor ID AND a TPU's device ID (Google's
gVNIC network card, on most Compute Engine VMs, shares the vendor ID); the device files of an
NVIDIA GPU (a Linux host, Docker, WSL2); AMD's KFD driver. Standard library only: the notebook asks
before anything is installed (notebooks/runtime.py), platforms.py before JAX starts a backend.

Every probe reads below `root` ("/" by default): the tests point it at recorded trees of Compute
Engine VMs (tests/data/machines/).
"""

import glob
import os
import re

_GOOGLE_PCI_VENDOR = "0x1ae0"
# The PCI device IDs of Google's TPU chips, as JAX's hardware_utils lists them (jax-ml/jax,
# jax/_src/hardware_utils.py, _TPU_PCI_DEVICE_IDS, 2026-08): v2 and v3 share 0x0027. Google's other
# PCI functions (gVNIC 0x0042, its NVMe 0x001f, its PCI bridges 0x0f48) are no TPU.
TPU_PCI_DEVICE_IDS = {
    "0x0027": "v3",
    "0x0056": "plc",
    "0x005e": "v4",
    "0x0062": "v5p",
    "0x0063": "v5e",
    "0x006f": "v6e",
    "0x0076": "7x",
    "0x0083": "8i",
    "0x007c": "8t",
}
_NVIDIA_DEVICE_FILES = ("dev/nvidia0", "dev/nvidiactl", "dev/dxg")
_NVIDIA_DRIVER_VERSION = "proc/driver/nvidia/version"
_AMD_KFD_NODES = "sys/class/kfd/kfd/topology/nodes/*/properties"


def _read(path: str) -> str:
  try:
    with open(path) as f:
      return f.read()
  except OSError:
    return ""


def _under(root: str, path: str) -> str:
  return os.path.join(root, path)


def tpu_chips(*, root: str = "/") -> list[str]:
  """The TPU chips on the PCI bus, one generation name ("v5e") each, in bus order."""
  chips = []
  for vendor in sorted(glob.glob(_under(root, "sys/bus/pci/devices/*/vendor"))):
    if _read(vendor).strip() != _GOOGLE_PCI_VENDOR:
      continue
    device = _read(os.path.join(os.path.dirname(vendor), "device")).strip()
    if device in TPU_PCI_DEVICE_IDS:
      chips.append(TPU_PCI_DEVICE_IDS[device])
  return chips


def google_tpu_chips(*, root: str = "/") -> int:
  """How many TPU chips the PCI bus lists."""
  return len(tpu_chips(root=root))


def _amd_gpus(*, root: str = "/") -> int:
  """How many of the KFD driver's nodes compute (a GPU's have SIMD units; a CPU's none)."""
  return sum(int(m.group(1)) > 0 for path in glob.glob(_under(root, _AMD_KFD_NODES))
             for m in [re.search(r"\bsimd_count\s+(\d+)", _read(path))] if m)


def nvidia_gpu(*, root: str = "/") -> bool:
  """Whether an NVIDIA GPU's device files are here."""
  return any(os.path.exists(_under(root, path)) for path in _NVIDIA_DEVICE_FILES)


def nvidia_driver_version(*, root: str = "/") -> str | None:
  """The loaded NVIDIA kernel driver's version ("580.95.05"), as the driver reports it in
  /proc/driver/nvidia/version; None where no NVIDIA driver is loaded (or WSL2, which has no such
  file)."""
  found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)",
                    _read(_under(root, _NVIDIA_DRIVER_VERSION)))
  return found.group(1) if found else None


def only_the_cpu_can_run(*, root: str = "/") -> bool:
  """Whether this machine has no TPU chip and no GPU, by the probes JAX makes before it opens an
  accelerator: the PCI bus, the NVIDIA device files, the AMD driver."""
  return (google_tpu_chips(root=root) == 0 and not nvidia_gpu(root=root) and
          _amd_gpus(root=root) == 0)
