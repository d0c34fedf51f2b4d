"""Every all-reduce algorithm built from ppermute equals psum, on any axis size it accepts."""

import functools

import jax
import numpy as np
from absl.testing import absltest, parameterized
from jax.sharding import NamedSharding, PartitionSpec as P

from hybrid_parallel import collectives
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel.errors import UserError


def random_tree(p: int, seed: int):
  """Per-device pytrees stacked on a leading axis of size p; odd sizes exercise the padding."""
  rng = np.random.RandomState(seed)
  return {"kernel": rng.randn(p, 3, 5, 7).astype(np.float32),
          "bias": rng.randn(p, 11).astype(np.float32),
          "scalar": rng.randn(p).astype(np.float32)}


def allreduce_on_data_axis(tree, p: int, algorithm: str):
  mesh = mesh_lib.make_mesh(p, 1)
  spec = P("data")

  @functools.partial(jax.shard_map, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False)
  def body(local):
    return jax.tree.map(lambda x: x[None], collectives.allreduce_sum(
        jax.tree.map(lambda x: x[0], local), ("data",), algorithm))

  placed = jax.device_put(tree, NamedSharding(mesh, spec))
  return jax.device_get(jax.jit(body)(placed))


class AllReduceTest(parameterized.TestCase):

  @parameterized.parameters(
      (algorithm, p) for algorithm in ("ring", "tree", "butterfly", "parameter_server")
      for p in (2, 3, 4, 8) if not (algorithm == "butterfly" and p == 3))  # see the next test
  def test_equals_psum_on_every_device(self, algorithm, p):
    tree = random_tree(p, seed=p)
    got = allreduce_on_data_axis(tree, p, algorithm)
    expected = allreduce_on_data_axis(tree, p, "psum")
    for name in tree:
      np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)
      # psum itself is the plain sum, replicated on every device.
      np.testing.assert_allclose(expected[name], np.broadcast_to(tree[name].sum(0),
                                                                 tree[name].shape), rtol=1e-5,
                                 atol=1e-5)

  def test_butterfly_rejects_three(self):
    with self.assertRaisesRegex(UserError, "grad_reduce 'butterfly' needs power-of-two mesh "
                                "axes, but mesh.data is 3; use ring or tree."):
      allreduce_on_data_axis(random_tree(3, 0), 3, "butterfly")

  @parameterized.parameters(True, False)
  def test_all_agree_whatever_axes_the_flag_varies_over(self, check_vma):
    # A flag that varies over "model" only (as the FC stage's finiteness does after its sum
    # over "data") is agreed over the whole 2 × 4 mesh: JAX >= 0.11 rejects a pmin naming an
    # axis its operand does not vary over.
    mesh = mesh_lib.make_mesh(2, 4)

    @functools.partial(jax.shard_map, mesh=mesh, in_specs=P("model"), out_specs=P(),
                       check_vma=check_vma)
    def body(local):
      return collectives.all_agree(local[0] > 0, mesh.axis_names)

    for values, expected in (([1, 1, 1, 1], True), ([1, 1, 0, 1], False)):
      placed = jax.device_put(np.array(values), NamedSharding(mesh, P("model")))
      self.assertEqual(bool(jax.jit(body)(placed)), expected)

  def test_unknown_algorithm(self):
    with self.assertRaisesRegex(UserError, "unknown grad_reduce 'gossip'"):
      collectives.allreduce_sum({"x": np.zeros(3)}, ("data",), "gossip")


if __name__ == "__main__":
  absltest.main()
