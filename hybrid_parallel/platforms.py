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

import importlib.util
import subprocess

from absl import logging

from hybrid_parallel import accelerators

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
  if (cuda or importlib.util.find_spec("libtpu")) and accelerators.only_the_cpu_can_run():
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
