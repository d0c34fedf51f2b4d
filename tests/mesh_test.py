"""The ("data", "model") mesh and its validation."""

import jax
from absl.testing import absltest

from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel.errors import UserError


class MeshTest(absltest.TestCase):

  def test_axes_and_device_order(self):
    mesh = mesh_lib.make_mesh(2, 4)
    self.assertEqual(dict(mesh.shape), {"data": 2, "model": 4})
    # Model neighbours are adjacent devices (the fast links on a real host).
    self.assertEqual([d.id for d in mesh.devices[0]], [0, 1, 2, 3])

  def test_mesh_larger_than_the_devices(self):
    with self.assertRaisesRegex(UserError, r"the mesh 4×4 needs 16 devices but only 8 cpu "
                                r"device\(s\) are available"):
      mesh_lib.make_mesh(4, 4)

  def test_sizes_must_be_positive_integers(self):
    with self.assertRaisesRegex(UserError, "mesh.model must be at least 1, got 0."):
      mesh_lib.make_mesh(2, 0)

  def test_cpu_runs_on_its_own_devices_without_a_note(self):
    # The suite's backend is the CPU (8 simulated devices): it runs the mesh itself, stand-ins
    # asked for or not.
    for asked in (False, True):
      devices, note = mesh_lib.pick_devices(2, 2, cpu_stand_ins=asked)
      self.assertEqual(devices, jax.devices())
      self.assertIsNone(note)


class WhereTheMeshRunsTest(absltest.TestCase):
  """mesh.cpu_stands_in, the decision pick_devices makes from the default backend's platform and
  device count (here parameters: this machine has no accelerator)."""

  def test_accelerators_too_few_for_the_mesh_are_refused_naming_both_ways_out(self):
    # owt8 (2×4) on a 4-chip TPU v4-8, as docs/tpu.md once suggested.
    with self.assertRaises(UserError) as refused:
      mesh_lib.cpu_stands_in(2, 4, platform="tpu", available=4, cpu_stand_ins=False)
    self.assertEqual(
        str(refused.exception),
        "the 2×4 mesh needs 8 devices but JAX has 4 TPU device(s) here: choose a mesh that fits "
        "them (config.mesh.data × config.mesh.model at most 4), or ask for 8 simulated CPU "
        "devices to stand in with --cpu_devices=8 (platforms.start(cpu_devices=8) from "
        "Python), which run many times slower.")
    with self.assertRaisesRegex(UserError, r"the 2×2 mesh needs 4 devices but JAX has 1 GPU"):
      mesh_lib.cpu_stands_in(2, 2, platform="gpu", available=1, cpu_stand_ins=False)

  def test_stand_ins_run_the_mesh_only_where_asked_for(self):
    self.assertTrue(mesh_lib.cpu_stands_in(2, 4, platform="gpu", available=4,
                                           cpu_stand_ins=True))

  def test_accelerators_that_hold_the_mesh_run_it(self):
    for asked in (False, True):
      self.assertFalse(mesh_lib.cpu_stands_in(2, 4, platform="gpu", available=8,
                                              cpu_stand_ins=asked))

  def test_a_machine_without_an_accelerator_simulates(self):
    # The CPU backend is the machine (or the user's JAX_PLATFORMS=cpu): nothing to stand in for.
    self.assertFalse(mesh_lib.cpu_stands_in(2, 4, platform="cpu", available=1,
                                            cpu_stand_ins=False))


if __name__ == "__main__":
  absltest.main()
