"""Which platform JAX runs on, decided once per process before its backends start.

Every entry point — main.py, each benchmark, the notebook — calls `start` before anything queries
the devices:

* the user's choice (JAX_PLATFORMS, or jax_platforms set earlier) is obeyed as it stands;
* on a machine with no accelerator JAX is told to use the CPU, so that no accelerator backend is
  tried: JAX would otherwise try each first — an installed libtpu or CUDA plugin (which compile
  for TPU and GPU topologies without the hardware) printing libtpu's five lines of complaints or
  the CUDA plugin's traceback, and without them its own "Unable to initialize backend 'tpu'"
  line — before settling on the CPU;
* NVIDIA GPUs that this JAX cannot use (no CUDA plugin installed) are named, with the install
  command that would use them: JAX itself falls back to the CPU with one easily missed line;
* `cpu_devices` asks for that many simulated CPU devices to stand in for accelerators too few for
  a mesh (mesh.pick_devices refuses such a mesh otherwise; where accelerators can hold the mesh
  they run it); `simulate_on_cpu` only sets how many devices the CPU backend simulates where it
  runs the mesh anyway (no accelerator, or JAX_PLATFORMS=cpu) — main.py's default, no request.
"""

import importlib.util
import subprocess

from absl import logging

from hybrid_parallel import accelerators

# The CUDA plugins of jax[cuda12] / jax[cuda13]: without one, jaxlib has no GPU backend.
CUDA_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin")


# Whether this process asked for CPU stand-ins (`start(cpu_devices=)`).
_cpu_stand_ins_asked = False


def start(*, cpu_devices: int | None = None, simulate_on_cpu: int | None = None) -> None:
  """Sets JAX's platform and CPU device count (module docstring); call before the first device
  query. Returns nothing and starts no backend (jax.distributed may still initialise after).

  Args:
    cpu_devices: simulate this many CPU devices and let them stand in for accelerators too few
      for a mesh (the explicit request: a notebook's demo, main.py's --cpu_devices).
    simulate_on_cpu: simulate this many CPU devices where JAX runs on the CPU anyway; no request
      for stand-ins (ignored when `cpu_devices` is given).
  """
  global _cpu_stand_ins_asked
  import jax
  if cpu_devices or simulate_on_cpu:
    jax.config.update("jax_num_cpu_devices", cpu_devices or simulate_on_cpu)
  _cpu_stand_ins_asked = _cpu_stand_ins_asked or bool(cpu_devices)
  if jax.config.jax_platforms:  # the user's choice needs no advice.
    return
  cuda = any(importlib.util.find_spec(plugin) for plugin in CUDA_PLUGINS)
  if accelerators.only_the_cpu_can_run():
    jax.config.update("jax_platforms", "cpu")
  gpus = nvidia_gpus()
  if gpus and not cuda:
    logging.warning("%s present, but this jaxlib has no CUDA backend and JAX runs on the CPU; "
                    "for the GPU: pip install -r requirements-cuda12.txt (or -cuda13.txt).",
                    " and ".join(gpus))


def cpu_stand_ins_asked() -> bool:
  """Whether `start` was asked for CPU stand-ins (its `cpu_devices`)."""
  return _cpu_stand_ins_asked


def nvidia_gpus() -> list[str]:
  """The NVIDIA GPUs `nvidia-smi -L` lists (none where it is missing or fails)."""
  try:
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
  except (OSError, subprocess.SubprocessError):
    return []
  return [line.split(" (UUID")[0] for line in listed.stdout.splitlines()
          if listed.returncode == 0 and line.startswith("GPU ")]
