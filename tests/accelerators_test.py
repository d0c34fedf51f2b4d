"""The accelerator probes (hybrid_parallel/accelerators.py) on recorded machines
(tests/data/machines/: a TPU v5e-1 VM, a GPU VM and a CPU VM, each with Google's gVNIC network
card, whose PCI vendor ID is the TPU's), and the notebook's reading of them."""

import os

from absl.testing import absltest, parameterized

from hybrid_parallel import accelerators
from notebooks import runtime

MACHINES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "machines")


def machine(name: str) -> str:
  return os.path.join(MACHINES, name)


class RecordedMachinesTest(parameterized.TestCase):

  @parameterized.named_parameters(
      # (machine, TPU chips, NVIDIA GPU, only the CPU, the notebook's accelerator)
      ("tpu_v5e_1", "tpu_v5e_1", ["v5e"], False, False, "tpu"),
      ("gpu_vm_with_gvnic", "gpu_h100_gvnic", [], True, False, "gpu"),
      ("cpu_vm_with_gvnic", "cpu_gvnic", [], False, True, "cpu"),
  )
  def test_each_machine_is_told_apart(self, name, chips, gpu, only_cpu, notebook):
    root = machine(name)
    self.assertEqual(accelerators.tpu_chips(root=root), chips)
    self.assertEqual(accelerators.google_tpu_chips(root=root), len(chips))
    self.assertEqual(accelerators.nvidia_gpu(root=root), gpu)
    self.assertEqual(accelerators.only_the_cpu_can_run(root=root), only_cpu)
    self.assertEqual(runtime.accelerator(root=root), notebook)

  def test_google_s_other_pci_functions_are_no_tpu(self):
    # What counting the vendor ID alone found: every Google function (gVNIC, NVMe, PCI bridges).
    google = {name: sum(
        open(os.path.join(devices, d, "vendor")).read().strip() == "0x1ae0"
        for d in os.listdir(devices))
        for name in ("tpu_v5e_1", "gpu_h100_gvnic", "cpu_gvnic")
        for devices in [os.path.join(machine(name), "sys", "bus", "pci", "devices")]}
    self.assertEqual(google, {"tpu_v5e_1": 3, "gpu_h100_gvnic": 4, "cpu_gvnic": 1})
    self.assertEqual([accelerators.google_tpu_chips(root=machine(name)) for name in google],
                     [1, 0, 0])

  def test_the_driver_version_is_read_from_the_kernel_module(self):
    self.assertEqual(accelerators.nvidia_driver_version(root=machine("gpu_h100_gvnic")),
                     "580.95.05")
    self.assertIsNone(accelerators.nvidia_driver_version(root=machine("cpu_gvnic")))


if __name__ == "__main__":
  absltest.main()
