"""Learning-rate rules equal their formulas; the update is Krizhevsky et al.'s."""

from tests import testing  # noqa: F401  (sets up 8 CPU devices first)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from absl.testing import absltest, parameterized  # noqa: E402

from hybrid_parallel import optim  # noqa: E402
from hybrid_parallel.errors import UserError  # noqa: E402


class ScheduleTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("none", "none", 0.01), ("linear", "linear", 0.08), ("sqrt", "sqrt", 0.01 * 8 ** 0.5))
  def test_peak_learning_rate(self, rule, expected):
    self.assertAlmostEqual(optim.peak_learning_rate(0.01, 1024, 128, rule), expected)

  def test_gradual_warmup_then_step_decay(self):
    config = testing.tiny_config(base_learning_rate=0.1, reference_batch_size=256,
                                 lr_scaling="linear", warmup_epochs=2, lr_decay="step",
                                 lr_decay_factor=0.1, lr_decay_epochs=(5, 8))
    schedule = optim.learning_rate_schedule(config, global_batch=2048, steps_per_epoch=10,
                                            total_steps=100)
    peak = 0.1 * 8
    # Goyal et al.: from η at step 0 linearly to kη after 5 (here 2) epochs.
    np.testing.assert_allclose(schedule(0), 0.1, rtol=1e-6)
    np.testing.assert_allclose(schedule(10), (0.1 + peak) / 2, rtol=1e-6)
    np.testing.assert_allclose(schedule(20), peak, rtol=1e-6)
    np.testing.assert_allclose(schedule(49), peak, rtol=1e-6)  # decays at epoch 5 = step 50,
    np.testing.assert_allclose(schedule(50), peak * 0.1, rtol=1e-6)
    np.testing.assert_allclose(schedule(80), peak * 0.01, rtol=1e-6)  # and again at epoch 8.

  def test_cosine_decay_reaches_zero(self):
    config = testing.tiny_config(lr_decay="cosine", base_learning_rate=0.02, lr_scaling="none")
    schedule = optim.learning_rate_schedule(config, 128, 10, 100)
    np.testing.assert_allclose([schedule(0), schedule(50), schedule(100)], [0.02, 0.01, 0.0],
                               atol=1e-7)

  @parameterized.named_parameters(
      ("scaling", dict(lr_scaling="cubic"), "unknown lr_scaling 'cubic'"),
      ("decay", dict(lr_decay="poly"), "unknown lr_decay 'poly'"),
  )
  def test_unknown_rules(self, overrides, message):
    with self.assertRaisesRegex(UserError, message):
      optim.learning_rate_schedule(testing.tiny_config(**overrides), 128, 10, 100)


class UpdateTest(absltest.TestCase):

  def test_krizhevsky_update_with_decay_on_weights_only(self):
    config = testing.tiny_config(momentum=0.9, weight_decay=5e-4, nesterov=False)
    lr = 0.1
    tx = optim.make_optimizer(config, lambda _: lr)
    params = {"kernel": jnp.full((2, 2), 3.0), "bias": jnp.full((2,), 3.0)}
    grads = [{"kernel": jnp.full((2, 2), g), "bias": jnp.full((2,), g)} for g in (1.0, -2.0)]
    state = tx.init(params)
    # v ← 0.9 v − 0.0005 ε w − ε ∇L ; w ← w + v (Krizhevsky et al. 2012, §5), no decay on biases.
    w = {"kernel": 3.0, "bias": 3.0}
    v = {"kernel": 0.0, "bias": 0.0}
    for g in grads:
      updates, state = tx.update(g, state, params)
      params = {k: params[k] + updates[k] for k in params}
      for k, decay in (("kernel", 5e-4), ("bias", 0.0)):
        v[k] = 0.9 * v[k] - decay * lr * w[k] - lr * float(g[k].ravel()[0])
        w[k] = w[k] + v[k]
    np.testing.assert_allclose(params["kernel"], w["kernel"], rtol=1e-6)
    np.testing.assert_allclose(params["bias"], w["bias"], rtol=1e-6)
    self.assertNotAlmostEqual(w["kernel"], w["bias"])


if __name__ == "__main__":
  absltest.main()
