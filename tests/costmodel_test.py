"""The cost model: AlexNet arithmetic, α-β formulas, traffic equal to the compiled step's."""

from tests import testing  # noqa: F401  (sets up 8 CPU devices first)

import math  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from absl.testing import absltest, parameterized  # noqa: E402

from hybrid_parallel import costmodel, hlo_stats, models, partitioning  # noqa: E402

OWT = models.ARCHITECTURES["alexnet_owt"]
LINK = costmodel.Link("test", alpha=1e-5, beta=1e-9, gamma=1e-10)


class ArithmeticTest(parameterized.TestCase):

  def test_one_column_alexnet(self):
    layers = costmodel.layers(OWT, 224, 1000)
    macs = sum(layer.macs for layer in layers)
    self.assertEqual(sum(layer.params for layer in layers), 61_100_840)  # = models' count
    self.assertAlmostEqual(macs / 1e6, 714.2, places=1)  # REFERENCES: 714.2 M multiply-adds
    conv = sum(layer.macs for layer in layers if layer.kind == "conv")
    self.assertAlmostEqual(conv / macs, 0.918, places=3)  # convs 91.8% of the compute
    self.assertAlmostEqual(costmodel.training_flops_per_image(OWT, 224, 1000) / 1e9, 4.29,
                           places=2)

  def test_two_column_alexnet(self):
    layers = costmodel.layers(models.ARCHITECTURES["alexnet"], 224, 1000)
    self.assertEqual(sum(layer.params for layer in layers), 60_965_224)
    self.assertAlmostEqual(sum(layer.macs for layer in layers) / 1e6, 724.4, places=1)

  @parameterized.named_parameters(("k2", 2, 244), ("k4", 4, 367), ("k8", 8, 428))
  def test_data_parallel_ring_bytes(self, k, megabytes):
    # REFERENCES: ≈ 244 / 367 / 428 MB per worker for K = 2 / 4 / 8 (one-column net, 61.1 M).
    traffic = costmodel.traffic(OWT, partitioning.plan("data", k, 1), 128 * k, 224, 1000)
    self.assertAlmostEqual(traffic.total / 1e6, megabytes, delta=1)

  @parameterized.named_parameters(("k2", 2, 10, 9), ("k4", 4, 15, 28), ("k8", 8, 17, 66))
  def test_owt_conv_gradients_and_fc6_gather(self, k, conv_mb, fc6_mb):
    # REFERENCES: owt ≈ 10 / 15 / 17 MB of conv gradients plus 9 / 28 / 66 MB of gathered FC
    # activations (fc6's input); our total adds fc7's input and the logits.
    plan = partitioning.plan("owt", 1, k)
    traffic = costmodel.traffic(OWT, plan, 128 * k, 224, 1000)
    self.assertAlmostEqual(traffic.gradients / 1e6, conv_mb, delta=0.5)
    fc6_input = 128 * k * 6 * 6 * 256 * 4
    self.assertAlmostEqual(2 * (k - 1) / k * fc6_input / 1e6, fc6_mb, delta=0.5)
    self.assertGreater(traffic.activations, 2 * (k - 1) / k * fc6_input)


class FormulaTest(parameterized.TestCase):

  def test_thakur_formulas(self):
    n, p = 1e6, 8
    a, b, g = LINK.alpha, LINK.beta, LINK.gamma
    expected = {
        "ring": 2 * 7 * a + 2 * n * 7 / 8 * b + n * 7 / 8 * g,
        "butterfly": 2 * 3 * a + 2 * n * 7 / 8 * b + n * 7 / 8 * g,
        "tree": 2 * 3 * (a + n * b) + 3 * n * g,
        "parameter_server": 2 * 7 * (a + n * b) + 7 * n * g,
    }
    for algorithm, seconds in expected.items():
      self.assertAlmostEqual(costmodel.allreduce_time(algorithm, n, p, LINK), seconds)
    self.assertEqual(costmodel.allreduce_time("ring", n, 1, LINK), 0.0)

  def test_ring_beats_tree_beats_parameter_server_on_large_messages(self):
    times = [costmodel.allreduce_time(alg, 244e6, 64, LINK)
             for alg in ("ring", "tree", "parameter_server")]
    self.assertEqual(times, sorted(times))
    self.assertGreater(times[2] / times[1], 63 / math.log2(64) * 0.9)


class CompiledTrafficTest(parameterized.TestCase):

  @parameterized.named_parameters(("data", "data", 4, 1, "alexnet_tiny"),
                                  ("hybrid", "hybrid", 2, 2, "alexnet_tiny"),
                                  ("owt", "owt", 2, 4, "alexnet_owt_tiny"))
  def test_the_compiled_step_moves_the_analytic_minimum(self, scheme, data, model, name):
    batch = 32
    setup = testing.build(name, scheme, data, model, testing.tiny_config(model=name), batch)
    images = jax.ShapeDtypeStruct((batch, 64, 64, 3), jnp.float32, sharding=setup["sharding"])
    labels = jax.ShapeDtypeStruct((batch,), jnp.int32, sharding=setup["sharding"])
    hlo = setup["train_step"].lower(setup["state"], images, labels).compile().as_text()
    stats = hlo_stats.collective_stats(hlo, data * model)
    measured = sum(s.bytes_per_device for s in stats.values())
    expected = costmodel.traffic(models.ARCHITECTURES[name], setup["plan"], batch, 64, 10).total
    # Beyond the minimum the step only moves its two scalar metrics and, in owt, the int32
    # labels and example ids gathered along with the features (under 8 bytes per example).
    self.assertBetween(measured - expected, 0, 8 * batch + 64)


if __name__ == "__main__":
  absltest.main()
