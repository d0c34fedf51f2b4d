"""Model averaging: sync_every=1 is synchronous SGD; butterfly and hopping-ring reach the mean."""

import functools

import jax
import numpy as np
from absl.testing import absltest, parameterized
from jax.sharding import NamedSharding, PartitionSpec as P

from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel.errors import UserError
from hybrid_parallel.local_sgd import averaging
from tests import numerics, testing

GLOBAL_BATCH = 16
BATCHES = testing.random_batches(3, GLOBAL_BATCH)
CONFIG = testing.tiny_config(base_learning_rate=0.05, reference_batch_size=GLOBAL_BATCH,
                             lr_decay="constant")  # dropout stays on


def mix_repeatedly(values, method, syncs):
  """Applies `syncs` consecutive syncs of `method` to per-replica `values` [D, n]."""
  replicas = values.shape[0]
  mesh = mesh_lib.make_mesh(replicas, 1)

  @functools.partial(jax.shard_map, mesh=mesh, in_specs=P("data"), out_specs=P("data"),
                     check_vma=False)
  def body(local):
    for s in range(syncs):
      local = averaging.mix(local, method, replicas=replicas, sync_index=s)
    return local

  return np.asarray(jax.jit(body)(jax.device_put(values, NamedSharding(mesh, P("data")))))


@functools.cache
def synchronous_sgd():
  """(data parallelism's losses and variables, the single device's in float64) on CONFIG and
  BATCHES: computed once, for every averaging method compared with them (the averaging settings
  are no part of either run)."""
  expected = testing.train_steps(
      testing.build("alexnet_tiny", "data", 4, 1, CONFIG, GLOBAL_BATCH), BATCHES)[1:]
  # Data parallelism is the single-device SGD (step_test), whose float64 run is exact.
  exact = testing.float64_steps("alexnet_tiny", "single", 1, 1, CONFIG, GLOBAL_BATCH, BATCHES)
  return expected, exact


class AveragingTest(parameterized.TestCase):

  @parameterized.named_parameters(("allreduce", "allreduce"), ("ring", "ring"))
  def test_sync_every_step_equals_synchronous_data_parallel(self, method):
    config = CONFIG.copy_and_resolve_references()
    config.update(sync_every=1, average_method=method, average_momentum=True)
    got = testing.train_steps(
        testing.build("alexnet_tiny", "averaging", 4, 1, config, GLOBAL_BATCH), BATCHES)[1:]
    numerics.assert_as_accurate(got, *synchronous_sgd())

  def test_longer_periods_let_replicas_drift(self):
    config = CONFIG.copy_and_resolve_references()
    config.update(sync_every=2, average_method="allreduce")
    run = testing.build("alexnet_tiny", "averaging", 4, 1, config, GLOBAL_BATCH)
    state, _, _ = testing.train_steps(run, BATCHES[:1])  # one local step: replicas differ
    kernel = np.asarray(state.local.params["fc8"]["kernel"])
    self.assertGreater(np.abs(kernel[0] - kernel[1]).max(), 1e-4)
    state, _, _ = testing.train_steps(run, BATCHES[1:2], state)  # the second step syncs
    kernel = np.asarray(state.local.params["fc8"]["kernel"])  # replicas agree
    np.testing.assert_allclose(kernel[1:], np.broadcast_to(kernel[0], kernel[1:].shape),
                               atol=1e-7)

  @parameterized.named_parameters(("butterfly_8", "butterfly", 8, 3),
                                  ("butterfly_4", "butterfly", 4, 2),
                                  ("hopping_ring_8", "hopping_ring", 8, 3))
  def test_mixing_reaches_the_exact_mean_after_lg_d_syncs(self, method, replicas, syncs):
    values = np.random.RandomState(0).randn(replicas, 5).astype(np.float32)
    mean = np.broadcast_to(values.mean(0), values.shape)
    self.assertGreater(np.abs(mix_repeatedly(values, method, syncs - 1) - mean).max(), 1e-2)
    # Each stage's (a + b) / 2 is rounded once, correctly on any CPU (elementwise IEEE
    # arithmetic: no summation order to change): at most half an ulp per stage, and the mean
    # itself (numpy: a sum of D, then ÷ D) adds at most D half-ulps.
    np.testing.assert_allclose(mix_repeatedly(values, method, syncs), mean,
                               atol=(syncs + replicas) / 2 * numerics.float32_ulp(values))

  def test_one_butterfly_stage_pairs_xor_partners(self):
    values = np.arange(4, dtype=np.float32)[:, None]
    np.testing.assert_allclose(mix_repeatedly(values, "butterfly", 1)[:, 0], [0.5, 0.5, 2.5, 2.5])
    np.testing.assert_allclose(mix_repeatedly(values, "hopping_ring", 1)[:, 0],
                               [1.5, 0.5, 1.5, 2.5])  # (θ_i + θ_{i-1}) / 2

  def test_bad_settings(self):
    with self.assertRaisesRegex(UserError, "butterfly mixing needs a power-of-two number of "
                                "replicas, got mesh.data = 3"):
      averaging.check(averaging.Settings("butterfly", 1, True), 3)


if __name__ == "__main__":
  absltest.main()
