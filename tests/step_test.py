"""Every synchronous scheme computes the single-device SGD: same losses, same parameters."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest, parameterized
from jax.sharding import PartitionSpec as P

from hybrid_parallel import models
from hybrid_parallel.analysis import hlo_stats
from hybrid_parallel.steps import common, explicit
from tests import testing

GLOBAL_BATCH = 16  # divisible by every mesh below, including owt's 8-way conv batch.
STEPS = 3
CONFIG = testing.tiny_config(base_learning_rate=0.05, reference_batch_size=GLOBAL_BATCH,
                             lr_decay="constant")  # dropout_rate stays 0.5: dropout is on.
BATCHES = testing.random_batches(STEPS, GLOBAL_BATCH)
_reference = {}


def reference(model_name, optimizer="sgd"):
  """Losses and variables of the single-device run (computed once per model and optimiser)."""
  if (model_name, optimizer) not in _reference:
    config = CONFIG.copy_and_resolve_references()
    config.optimizer = optimizer
    run = testing.build(model_name, "single", 1, 1, config, GLOBAL_BATCH)
    initial = jax.tree.map(np.asarray, run.scheme.state.params)
    _, losses, variables = testing.train_steps(run, BATCHES)
    _reference[model_name, optimizer] = initial, losses, variables
  return _reference[model_name, optimizer]


class EquivalenceTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("data_2x1", "alexnet_tiny", "data", 2, 1),
      ("data_4x1", "alexnet_tiny", "data", 4, 1),
      ("model_1x2_two_columns", "alexnet_tiny", "model", 1, 2),
      ("model_1x2_one_column", "alexnet_owt_tiny", "model", 1, 2),
      ("hybrid_2x2", "alexnet_tiny", "hybrid", 2, 2),
      ("owt_1x8", "alexnet_owt_tiny", "owt", 1, 8),
      ("owt_2x4", "alexnet_owt_tiny", "owt", 2, 4),
      ("owt_2x4_two_columns", "alexnet_tiny", "owt", 2, 4),
      # The papers' reduction algorithms in place of psum (owt sums conv gradients over both axes).
      ("data_4x1_butterfly", "alexnet_tiny", "data", 4, 1, dict(grad_reduce="butterfly")),
      ("hybrid_2x2_ring", "alexnet_tiny", "hybrid", 2, 2, dict(grad_reduce="ring")),
      ("owt_2x4_tree", "alexnet_owt_tiny", "owt", 2, 4, dict(grad_reduce="tree")),
      ("data_2x1_parameter_server", "alexnet_tiny", "data", 2, 1,
       dict(grad_reduce="parameter_server")),
      # Gradient accumulation: k passes over slices of the batch make the whole batch's update.
      ("single_4_microbatches", "alexnet_tiny", "single", 1, 1, dict(microbatches=4)),
      ("data_2x1_2_microbatches", "alexnet_tiny", "data", 2, 1, dict(microbatches=2)),
      ("owt_2x4_2_microbatches", "alexnet_owt_tiny", "owt", 2, 4, dict(microbatches=2)),
      # LARS: trust ratios from norms summed over the shards of a split layer.
      ("hybrid_2x2_lars", "alexnet_tiny", "hybrid", 2, 2, dict(optimizer="lars")),
      ("owt_2x4_lars", "alexnet_owt_tiny", "owt", 2, 4, dict(optimizer="lars")),
      # Batch norm with statistics over the whole batch (per-worker statistics: models_test).
      ("model_1x2_batch_norm", "alexnet_bn_tiny", "model", 1, 2),
      ("hybrid_2x2_sync_batch_norm", "alexnet_bn_tiny", "hybrid", 2, 2,
       dict(sync_batch_norm=True)),
      ("owt_2x4_sync_batch_norm", "alexnet_bn_tiny", "owt", 2, 4, dict(sync_batch_norm=True)),
  )
  def test_three_steps_with_dropout_equal_single_device(self, model_name, scheme, data, model,
                                                        overrides=None):
    config = CONFIG.copy_and_resolve_references()
    config.update(overrides or {})
    initial, ref_losses, ref_variables = reference(model_name, config.optimizer)
    run = testing.build(model_name, scheme, data, model, config, GLOBAL_BATCH)
    _, losses, variables = testing.train_steps(run, BATCHES)

    np.testing.assert_allclose(losses, ref_losses, rtol=1e-6, atol=1e-6)
    moved = max(np.abs(a - b).max() for a, b in zip(jax.tree.leaves(ref_variables["params"]),
                                                     jax.tree.leaves(initial)))
    self.assertGreater(moved, 1e-3)  # the tolerance below is far smaller than the updates.
    self.assertEqual(jax.tree.structure(variables), jax.tree.structure(ref_variables))
    # Batch norm divides by the batch's σ, amplifying the rounding of sums split over devices.
    atol = 1e-6 if models.ARCHITECTURES[model_name].batch_norm else 2e-7
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=atol), variables,
                 ref_variables)

  @parameterized.named_parameters(
      ("hybrid_2x2", "alexnet_tiny", "hybrid", 2, 2),
      ("owt_2x4", "alexnet_owt_tiny", "owt", 2, 4),
  )
  def test_eval_sums_equal_single_device_with_padding(self, model_name, scheme, data, model):
    images, labels = BATCHES[0]
    weights = (np.arange(GLOBAL_BATCH) < 11).astype(np.float32)  # a partial last batch.
    sums = []
    for args in (("single", 1, 1), (scheme, data, model)):
      run = testing.build(model_name, *args, CONFIG, GLOBAL_BATCH)
      sums.append(jax.device_get(run.eval_step(run.scheme.eval_variables(run.scheme.state),
                                               *testing.put(run, images, labels, weights))))
    self.assertEqual(sums[0]["count"], 11)
    for key in sums[0]:
      np.testing.assert_allclose(sums[1][key], sums[0][key], rtol=1e-6)

  @parameterized.named_parameters(("single", "single", 1, 1), ("owt_2x4", "owt", 2, 4))
  def test_multi_crop_eval_averages_the_crops_softmaxes(self, scheme, data, model):
    crops = 3
    rng = np.random.RandomState(1)
    images = rng.randn(GLOBAL_BATCH, crops, *BATCHES[0][0].shape[1:]).astype(np.float32)
    labels, weights = BATCHES[0][1], np.ones(GLOBAL_BATCH, np.float32)
    single = testing.build("alexnet_owt_tiny", "single", 1, 1, CONFIG, GLOBAL_BATCH)
    variables = single.scheme.eval_variables(single.scheme.state)
    apply = jax.jit(single.model.apply)  # op by op, each operation would compile on its own.
    probs = np.mean([jax.nn.softmax(apply(
        variables, images[:, k], example_ids_B=common.example_ids(single.plan, GLOBAL_BATCH)))
        for k in range(crops)], axis=0)
    top1 = np.argmax(probs, -1) == labels
    run = testing.build("alexnet_owt_tiny", scheme, data, model, CONFIG, GLOBAL_BATCH)
    eval_step = explicit.make_eval_step(run.model, run.plan, run.mesh, run.scheme.eval_specs,
                                        crops=crops)
    sums = jax.device_get(eval_step(run.scheme.eval_variables(run.scheme.state),
                                    *testing.put(run, images, labels, weights)))
    np.testing.assert_allclose(sums["eval_loss"],
                               -np.log(probs[np.arange(GLOBAL_BATCH), labels]).sum(), rtol=1e-5)
    self.assertEqual(sums["eval_top1"], top1.sum())

  def test_state_is_placed_with_the_plan_specs(self):
    state = testing.build("alexnet_tiny", "hybrid", 2, 2, CONFIG, GLOBAL_BATCH).scheme.state
    params = state.params
    self.assertEqual(params["conv2"]["conv"]["kernel"].sharding.spec, P(None, None, None, "model"))
    self.assertEqual(params["fc8"]["kernel"].sharding.spec, P("model", None))
    momentum = state.opt_state[1][0].trace  # chain(decay, sgd) → sgd's trace.
    self.assertEqual(momentum["fc6"]["dense"]["kernel"].sharding.spec, P(None, "model"))
    # Device 1 (model index 1) holds the second column's conv2 filters.
    shard = params["conv2"]["conv"]["kernel"].addressable_shards[1]
    self.assertEqual(shard.data.shape, (5, 5, 8, 16))

  def test_dropout_changes_the_loss(self):
    # Guards the equivalence tests: they must run with dropout actually on. The first step's
    # training loss is the initial network's on BATCHES[0] with dropout; the evaluation step
    # computes the same network's loss on it without (alexnet_tiny has no batch norm).
    _, ref_losses, _ = reference("alexnet_tiny")
    run = testing.build("alexnet_tiny", "single", 1, 1, CONFIG, GLOBAL_BATCH)
    weights = np.ones(GLOBAL_BATCH, np.float32)
    sums = jax.device_get(run.eval_step(run.scheme.eval_variables(run.scheme.state),
                                        *testing.put(run, *BATCHES[0], weights)))
    self.assertGreater(abs(ref_losses[0] - sums["eval_loss"] / sums["count"]), 1e-3)


class MixedPrecisionTest(absltest.TestCase):
  """dtype = bfloat16: bfloat16 convolutions, matmuls and activation collectives; float32 state."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    config = CONFIG.copy_and_resolve_references()
    config.dtype = "bfloat16"
    cls.runs = {}
    for scheme, data, model in (("single", 1, 1), ("hybrid", 2, 2)):
      run = testing.build("alexnet_tiny", scheme, data, model, config, GLOBAL_BATCH)
      images, labels = testing.put(run, *BATCHES[0])
      # The program as JAX hands it to XLA: XLA:CPU itself, lacking bfloat16 kernels, converts
      # convolutions and collectives back to float32 (GPUs and TPUs keep them).
      hlo = run.scheme.train_step.lower(run.scheme.state, images, labels).as_text(dialect="hlo")
      state, losses, variables = testing.train_steps(run, BATCHES)
      cls.runs[scheme] = dict(hlo=hlo, losses=losses, variables=variables, state=state)

  def test_state_stays_float32(self):
    for leaf in jax.tree.leaves(self.runs["hybrid"]["state"]):
      if jnp.issubdtype(leaf.dtype, jnp.floating):
        self.assertEqual(leaf.dtype, jnp.float32)

  def test_convolutions_run_in_bfloat16(self):
    convolutions = [line for line in self.runs["single"]["hlo"].splitlines()
                    if " convolution(" in line]
    self.assertNotEmpty(convolutions)
    for line in convolutions:
      self.assertRegex(line, r"= bf16\[")

  def test_losses_follow_float32_and_the_hybrid_follows_one_device(self):
    _, f32_losses, _ = reference("alexnet_tiny")
    single, hybrid = self.runs["single"], self.runs["hybrid"]
    # bfloat16 keeps 8 bits of mantissa: a loss of about 2.3 is off by a few 1e-3.
    np.testing.assert_allclose(single["losses"], f32_losses, rtol=1e-2)
    self.assertFalse(np.allclose(single["losses"], f32_losses, rtol=1e-6, atol=0))
    np.testing.assert_allclose(hybrid["losses"], single["losses"], rtol=2e-3)
    for got, want in zip(jax.tree.leaves(hybrid["variables"]),
                         jax.tree.leaves(single["variables"])):
      np.testing.assert_allclose(got, want, atol=2e-3)

  def test_activation_collectives_move_half_the_bytes(self):
    float32 = testing.build("alexnet_tiny", "hybrid", 2, 2, CONFIG, GLOBAL_BATCH)
    images, labels = testing.put(float32, *BATCHES[0])
    hlo = float32.scheme.train_step.lower(float32.scheme.state, images, labels).as_text(
        dialect="hlo")
    gathered = {name: hlo_stats.collective_stats(text, 4)["all-gather"].payload_bytes
                for name, text in (("float32", hlo), ("bfloat16", self.runs["hybrid"]["hlo"]))}
    self.assertGreater(gathered["float32"], 0)
    self.assertEqual(gathered["bfloat16"], gathered["float32"] / 2)


if __name__ == "__main__":
  absltest.main()
