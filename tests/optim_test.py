"""Learning-rate rules equal their formulas; the update is Krizhevsky et al.'s."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl.testing import absltest, parameterized

import experiment
from hybrid_parallel import compiler_options, models, optim
from hybrid_parallel.errors import UserError
from tests import testing


class ScheduleTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("none", "none", 0.01), ("linear", "linear", 0.08), ("sqrt", "sqrt", 0.01 * 8 ** 0.5))
  def test_peak_learning_rate(self, rule, expected):
    self.assertAlmostEqual(optim.peak_learning_rate(0.01, 1024, reference_batch=128,
                                                    scaling=rule), expected)

  def test_gradual_warmup_then_step_decay_from_a_config(self):
    config = testing.tiny_config(base_learning_rate=0.1, reference_batch_size=256,
                                 global_batch_size=2048, lr_scaling="linear", warmup_epochs=2,
                                 lr_decay="step", lr_decay_factor=0.1, lr_decay_epochs=(5, 8))
    schedule = experiment.make_schedule(experiment.resolve(config), steps_per_epoch=10,
                                        total_steps=100)
    peak = 0.1 * 8
    # Goyal et al.: from η at step 0 linearly to kη after 5 (here 2) epochs.
    np.testing.assert_allclose(schedule(0), 0.1, rtol=1e-6)
    np.testing.assert_allclose(schedule(10), (0.1 + peak) / 2, rtol=1e-6)
    np.testing.assert_allclose(schedule(20), peak, rtol=1e-6)
    np.testing.assert_allclose(schedule(49), peak, rtol=1e-6)  # decays at epoch 5 = step 50,
    np.testing.assert_allclose(schedule(50), peak * 0.1, rtol=1e-6)
    np.testing.assert_allclose(schedule(80), peak * 0.01, rtol=1e-6)  # and again at epoch 8.

  def test_constant_warmup_holds_the_base_rate_then_jumps(self):
    schedule = optim.learning_rate_schedule(0.1, 0.8, steps_per_epoch=10, total_steps=100,
                                            warmup_epochs=2, warmup="constant",
                                            decay="constant")
    np.testing.assert_allclose([schedule(0), schedule(19), schedule(20), schedule(99)],
                               [0.1, 0.1, 0.8, 0.8], rtol=1e-6)

  def test_cosine_decay_reaches_zero(self):
    schedule = optim.learning_rate_schedule(0.02, 0.02, steps_per_epoch=10, total_steps=100,
                                            decay="cosine")
    np.testing.assert_allclose([schedule(0), schedule(50), schedule(100)], [0.02, 0.01, 0.0],
                               atol=1e-7)

  def test_unknown_scaling(self):
    with self.assertRaisesRegex(UserError, "unknown lr_scaling 'cubic'"):
      optim.peak_learning_rate(0.1, 128, reference_batch=128, scaling="cubic")

  @parameterized.named_parameters(
      ("decay", dict(decay="poly"), "unknown lr_decay 'poly'"),
      ("warmup", dict(warmup="linear"), "unknown warmup 'linear'"),
  )
  def test_unknown_schedule_rules(self, overrides, message):
    with self.assertRaisesRegex(UserError, message):
      optim.learning_rate_schedule(0.1, 0.1, steps_per_epoch=10, total_steps=100, **overrides)

  @parameterized.named_parameters(
      ("optimizer", dict(optimizer="adam"), "unknown optimizer 'adam'"),
      ("group", dict(lr_multipliers={"conv": 2.0, "head": 1.0}),
       "unknown lr_multipliers group 'head'"),
      ("group_at_one", dict(lr_multipliers={"head": 1.0}), "unknown lr_multipliers group 'head'"),
  )
  def test_unknown_optimizer_settings(self, overrides, message):
    with self.assertRaisesRegex(UserError, message):
      optim.make_optimizer(lambda _: 0.1, **overrides)


class UpdateTest(absltest.TestCase):

  def test_krizhevsky_update_with_decay_on_weights_only(self):
    lr = 0.1
    tx = optim.make_optimizer(lambda _: lr, momentum=0.9, weight_decay=5e-4, nesterov=False)
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



def _leaf_tree():
  """A kernel and a bias of one conv and one FC layer, with distinct values."""
  rng = np.random.RandomState(0)
  return {"conv1": {"kernel": jnp.asarray(rng.randn(3, 3, 2, 4), jnp.float32),
                    "bias": jnp.asarray(rng.randn(4), jnp.float32)},
          "fc6": {"kernel": jnp.asarray(rng.randn(5, 3), jnp.float32),
                  "bias": jnp.asarray(rng.randn(3), jnp.float32)}}


def _grads(steps):
  return [jax.tree.map(lambda p, i=i: jnp.cos(p * (i + 1)), _leaf_tree()) for i in range(steps)]


def _first_update(tx, grads, params):
  """The first update of `tx`, compiled as one program (op by op, every operation compiles)."""
  return jax.jit(lambda g, p: tx.update(g, tx.init(p), p)[0])(grads, params)


def _run(tx, grads, params=None):
  """Applies `tx` to the gradient sequence; returns the final parameters."""
  params = _leaf_tree() if params is None else params
  state = tx.init(params)
  for g in grads:
    updates, state = tx.update(g, state, params)
    params = optax.apply_updates(params, updates)
  return params


class LarsTest(absltest.TestCase):
  CONFIG = dict(optimizer="lars", momentum=0.9, weight_decay=5e-4, lars_trust_coefficient=0.001,
                lars_eps=0.0, nesterov=False)

  def test_trust_ratio_and_decay_on_kernels_only(self):
    tx = optim.make_optimizer(lambda _: 2.0, **self.CONFIG)
    params, grads = _leaf_tree(), _grads(1)[0]
    updates = _first_update(tx, grads, params)
    for layer in ("conv1", "fc6"):
      w, g = params[layer]["kernel"], grads[layer]["kernel"]
      u = g + 5e-4 * w  # You et al.: trust ratio η‖w‖/‖∇L + βw‖ on the decayed gradient.
      ratio = 0.001 * jnp.linalg.norm(w) / jnp.linalg.norm(u)
      np.testing.assert_allclose(updates[layer]["kernel"], -2.0 * ratio * u, rtol=1e-5)
      # Biases: the plain step, neither decayed nor scaled by a trust ratio.
      np.testing.assert_allclose(updates[layer]["bias"], -2.0 * grads[layer]["bias"], rtol=1e-6)

  def test_equals_optax_lars_at_a_constant_rate(self):
    ours = optim.make_optimizer(lambda _: 0.5, **self.CONFIG)
    mask = lambda p: jax.tree.map(lambda x: x.ndim > 1, p)
    reference = optax.lars(0.5, weight_decay=5e-4, weight_decay_mask=mask,
                           trust_coefficient=0.001, trust_ratio_mask=mask, momentum=0.9)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5),
                 _run(ours, _grads(4)), _run(reference, _grads(4)))

  def test_changing_rate_follows_goyal_momentum_correction(self):
    # Goyal et al. eq. (10) with the correction: v ← m·(η_t/η_{t-1})·v + η_t·u_t, w ← w − v,
    # u_t being the update before the learning rate (decayed, trust-scaled gradient for LARS).
    rates = [0.1, 0.4, 1.6, 0.2]
    schedule = lambda step: jnp.asarray(rates)[step]
    for optimizer in ("sgd", "lars"):
      settings = dict(self.CONFIG, optimizer=optimizer)
      ours = _run(optim.make_optimizer(schedule, **settings), _grads(4))
      # The same optimiser without momentum at rate 1 gives −u_t.
      no_momentum = optim.make_optimizer(lambda _: 1.0, **dict(settings, momentum=0.0))
      params, v, previous_rate = _leaf_tree(), None, None
      for rate, g in zip(rates, _grads(4)):
        u = jax.tree.map(lambda x: -x, _first_update(no_momentum, g, params))
        v = (jax.tree.map(lambda u_: rate * u_, u) if v is None else
             jax.tree.map(lambda v_, u_: 0.9 * rate / previous_rate * v_ + rate * u_, v, u))
        params = jax.tree.map(lambda w, v_: w - v_, params, v)
        previous_rate = rate
      jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), ours,
                   params)
    # optax.lars folds the rate into its momentum buffer without the correction: it differs.
    mask = lambda p: jax.tree.map(lambda x: x.ndim > 1, p)
    uncorrected = _run(optax.lars(schedule, weight_decay=5e-4, weight_decay_mask=mask,
                                  trust_coefficient=0.001, trust_ratio_mask=mask), _grads(4))
    self.assertGreater(max(np.abs(a - b).max() for a, b in
                           zip(jax.tree.leaves(uncorrected), jax.tree.leaves(params))), 1e-4)


class GroupMultiplierTest(absltest.TestCase):

  def test_conv_and_fc_rates_reach_exactly_their_layers(self):
    net = models.build("alexnet_bn_tiny", 10, image_size=64)
    params = compiler_options.jit_initializer(net.init, jax.devices()[0])(  # op by op: a
        jax.random.key(0), jnp.zeros((1, 64, 64, 3)),  # compile for each operation.
        example_ids_B=jnp.zeros(1, jnp.int32))["params"]
    grads = jax.tree.map(np.ones_like, params)  # numpy: one compile per shape otherwise.
    plain = dict(weight_decay=0.0, momentum=0.0)
    scaled = dict(weight_decay=0.0, momentum=0.0, lr_multipliers={"conv": 8.0, "fc": 1.0})
    base, got = (_first_update(optim.make_optimizer(lambda _: 0.01, **settings), grads, params)
                 for settings in (plain, scaled))
    factors = {}
    for (path, b), g in zip(jax.tree.leaves_with_path(base), jax.tree.leaves(got)):
      factor = float(np.unique(np.asarray(g) / np.asarray(b)).item())
      factors[path[0].key] = factors.get(path[0].key, set()) | {round(factor, 5)}
    self.assertEqual(factors, {"conv1": {8.0}, "conv1_bn": {8.0}, "conv2": {8.0},
                               "conv2_bn": {8.0}, "conv3": {8.0}, "conv3_bn": {8.0},
                               "conv4": {8.0}, "conv4_bn": {8.0}, "conv5": {8.0},
                               "conv5_bn": {8.0}, "fc6": {1.0}, "fc7": {1.0}, "fc8": {1.0}})


if __name__ == "__main__":
  absltest.main()
