"""The HLO accounting of small known programs equals hand-computed bytes and messages."""

from tests import testing  # noqa: F401  (sets up 8 CPU devices first)


import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from absl.testing import absltest  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from hybrid_parallel import collectives, hlo_stats  # noqa: E402
from hybrid_parallel import mesh as mesh_lib  # noqa: E402


def compiled_stats(body, local_shape=(8, 16)):
  mesh = mesh_lib.make_mesh(2, 4)
  fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("data", "model"),
                             out_specs=P("data", "model"), check_vma=False))
  x = jax.ShapeDtypeStruct((local_shape[0] * 2, local_shape[1] * 4), jnp.float32,
                           sharding=NamedSharding(mesh, P("data", "model")))
  return hlo_stats.collective_stats(fn.lower(x).compile().as_text(), num_devices=8)


class HloStatsTest(absltest.TestCase):

  def test_each_kind_by_hand(self):
    n = 8 * 16 * 4  # bytes of one device's f32[8,16] block

    def body(x):
      a = jax.lax.psum(x, "model")  # all-reduce, p = 4
      b = jax.lax.all_gather(x, "data", tiled=True)  # all-gather, p = 2, result 2n
      c = jax.lax.ppermute(x, "model", [(i, (i + 1) % 4) for i in range(4)])  # every device sends
      d = jax.lax.psum_scatter(x, "model", scatter_dimension=1, tiled=True)  # result n / 4
      return a + b[:8] + c + jnp.tile(d, (1, 4))

    stats = compiled_stats(body)
    self.assertEqual(stats["all-reduce"].ops, 1)
    self.assertAlmostEqual(stats["all-reduce"].bytes_per_device, 2 * 3 / 4 * n)
    self.assertEqual(stats["all-reduce"].messages_per_device, 6)
    self.assertAlmostEqual(stats["all-gather"].payload_bytes, 2 * n)
    self.assertAlmostEqual(stats["all-gather"].bytes_per_device, 1 / 2 * 2 * n)
    self.assertEqual(stats["all-gather"].messages_per_device, 1)
    self.assertAlmostEqual(stats["collective-permute"].bytes_per_device, n)
    self.assertAlmostEqual(stats["reduce-scatter"].bytes_per_device, 3 * n / 4)
    self.assertEqual(stats["all-to-all"].ops, 0)

  def test_parameter_server_serialises_at_the_root(self):
    # 2(p − 1) = 6 permutes of the whole vector over the model axis; in each, one device of
    # every 4 sends, so a device sends 6 · n / 4 on average — but the root sends the sum back
    # 3 times while each worker sends once.
    stats = compiled_stats(lambda x: collectives.parameter_server(x, "model"))
    n = 8 * 16 * 4
    self.assertEqual(stats["collective-permute"].ops, 6)
    self.assertAlmostEqual(stats["collective-permute"].bytes_per_device, 6 * n / 4)
    self.assertAlmostEqual(stats["collective-permute"].busiest_device_bytes, 3 * n)
    self.assertEqual(stats["all-reduce"].ops, 0)

  def test_ring_moves_the_bandwidth_optimal_volume(self):
    stats = compiled_stats(lambda x: collectives.ring(x, "model"))
    n = 8 * 16 * 4
    self.assertEqual(stats["collective-permute"].ops, 2 * 3)
    self.assertAlmostEqual(stats["collective-permute"].bytes_per_device, 2 * 3 / 4 * n)
    self.assertAlmostEqual(stats["collective-permute"].busiest_device_bytes, 2 * 3 / 4 * n)

  def test_shapes(self):
    self.assertEqual(hlo_stats.shape_bytes("bf16[3,5]{1,0}"), 30)
    self.assertEqual(hlo_stats.shape_bytes("(f32[2], s32[4])"), 24)


if __name__ == "__main__":
  absltest.main()
