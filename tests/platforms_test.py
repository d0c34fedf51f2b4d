"""The one platform choice every entry point makes (hybrid_parallel/platforms.py), as a user meets
it: a benchmark on a machine without a TPU prints none of libtpu's complaints, a GPU that JAX
cannot use is named, and the user's JAX_PLATFORMS is obeyed. main.py's side: main_test."""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

from absl.testing import absltest

from hybrid_parallel import accelerators, platforms
from tests.main_test import ROOT, nvidia_smi_listing

# CI's machine: libtpu installed (requirements-test.txt), no accelerator.
WITHOUT_ACCELERATOR_WITH_LIBTPU = unittest.skipUnless(
    importlib.util.find_spec("libtpu") and accelerators.only_the_cpu_can_run(),
    "needs a machine without an accelerator, with libtpu installed (CI's)")

# What libtpu prints when JAX opens it on a machine without a TPU, and JAX's line after it.
LIBTPU_COMPLAINTS = ("could not determine TPU", "Unable to initialize backend 'tpu'")


def run(args, *, env):
  # JAX_PLATFORMS unset unless `env` names it, as a user has it (the suite sets it to cpu).
  return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                        timeout=300, env={**os.environ, "JAX_PLATFORMS": "", **env})


START_AND_REPORT = ("from hybrid_parallel import platforms\n"
                    "platforms.start(cpu_devices=3)\n"
                    "import jax\n"
                    "print(jax.config.jax_platforms, jax.config.jax_num_cpu_devices)\n")


def started_with(arguments: str) -> list[str]:
  """What `platforms.start(ARGUMENTS)` leaves: the CPU device count and whether CPU stand-ins
  were asked for."""
  return run(["-c", f"from hybrid_parallel import platforms\n"
                    f"platforms.start({arguments})\n"
                    f"import jax\n"
                    f"print(jax.config.jax_num_cpu_devices, platforms.cpu_stand_ins_asked())\n"],
             env={"JAX_PLATFORMS": "cpu"}).stdout.split()


class PlatformsTest(absltest.TestCase):

  @WITHOUT_ACCELERATOR_WITH_LIBTPU
  def test_a_benchmark_on_a_machine_without_a_tpu_is_quiet(self):
    result = run(["-m", "benchmarks.communication.comm_volume", "--config=configs/single.py"],
                 env={})
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    for complaint in LIBTPU_COMPLAINTS:
      self.assertNotIn(complaint, result.stderr)
    self.assertEqual(json.loads(result.stdout.splitlines()[-1])["scheme"], "single")

  @WITHOUT_ACCELERATOR_WITH_LIBTPU
  def test_no_accelerator_means_the_cpu_with_the_devices_asked_for(self):
    result = run(["-c", START_AND_REPORT], env={})
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertEqual(result.stdout.split(), ["cpu", "3"])

  def test_cpu_devices_ask_for_stand_ins_and_simulate_on_cpu_does_not(self):
    # main.py simulates the mesh's devices where the CPU runs it (simulate_on_cpu); only
    # --cpu_devices (cpu_devices) lets them stand in for accelerators too few for the mesh.
    self.assertEqual(started_with("cpu_devices=3"), ["3", "True"])
    self.assertEqual(started_with("simulate_on_cpu=4"), ["4", "False"])
    self.assertEqual(started_with("cpu_devices=3, simulate_on_cpu=4"), ["3", "True"])

  def test_the_users_platforms_are_obeyed_and_need_no_advice(self):
    with tempfile.TemporaryDirectory() as bin_dir:
      path = nvidia_smi_listing(bin_dir, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)")
      result = run(["-c", START_AND_REPORT], env={"JAX_PLATFORMS": "tpu,cpu", "PATH": path})
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertEqual(result.stdout.split(), ["tpu,cpu", "3"])  # not replaced by "cpu".
    self.assertNotIn("no CUDA backend", result.stderr)

  @unittest.skipIf(any(map(importlib.util.find_spec, platforms.CUDA_PLUGINS)),
                   "this JAX has a CUDA plugin: it uses the GPU")
  def test_a_gpu_this_jax_cannot_use_is_named_with_the_install_command(self):
    with tempfile.TemporaryDirectory() as bin_dir:
      path = nvidia_smi_listing(bin_dir, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n"
                                         "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)")
      result = run(["-c", START_AND_REPORT], env={"PATH": path})
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertIn("GPU 0: NVIDIA H100 80GB HBM3 and GPU 1: NVIDIA H100 80GB HBM3 present, but "
                  "this jaxlib has no CUDA backend and JAX runs on the CPU; for the GPU: pip "
                  "install -r requirements-cuda12.txt (or -cuda13.txt).", result.stderr)


if __name__ == "__main__":
  absltest.main()
