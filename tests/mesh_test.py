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
    devices, note = mesh_lib.pick_devices(4)
    self.assertEqual(devices, jax.devices())
    self.assertIsNone(note)


if __name__ == "__main__":
  absltest.main()
