"""Every synchronous scheme computes the single-device SGD: same losses, same parameters."""

import dataclasses
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest, parameterized
from jax.sharding import PartitionSpec as P

from hybrid_parallel import collectives
from hybrid_parallel.analysis import hlo_stats
from hybrid_parallel.steps import common, explicit
from tests import numerics, testing

GLOBAL_BATCH = 16  # divisible by every mesh below, including owt's 8-way conv batch.
STEPS = 3
CONFIG = testing.tiny_config(base_learning_rate=0.05, reference_batch_size=GLOBAL_BATCH,
                             lr_decay="constant")  # dropout_rate stays 0.5: dropout is on.
BATCHES = testing.random_batches(STEPS, GLOBAL_BATCH)
# resnet_cifar_tiny runs at its own image size (models.ARCHITECTURES: 32², as resnet50_cifar's
# 28² crops), on the top-left 32² of BATCHES' images: a scheme equals one device at any image
# size, and at 64² its stride-1 stem and first stage do 4× the arithmetic, most of the test's
# CPU time in its float64 reference's convolutions (CPU seconds measured on a 2-core AMD EPYC:
# 37 of the hybrid test's 49 at 64², 13 of 24 at 32²).
SMALLER_IMAGES = {"resnet_cifar_tiny": 32}
_reference = {}


def sized(model_name, config):
  """`config` and BATCHES at `model_name`'s image size (SMALLER_IMAGES, or the tests' 64²)."""
  size = SMALLER_IMAGES.get(model_name, testing.IMAGE_SIZE)
  config = config.copy_and_resolve_references()
  config.image_size = size
  return config, [(images[:, :size, :size], labels) for images, labels in BATCHES]


@dataclasses.dataclass(frozen=True)
class Reference:
  """The single-device run of a model and optimiser on BATCHES."""
  initial: dict  # the parameters before the first step.
  losses: np.ndarray  # per step, float32.
  variables: dict  # after the last step, float32.
  exact: tuple  # (losses, variables) of the same run in float64 (tests/numerics.py).


def reference(model_name, optimizer="sgd") -> Reference:
  """The single-device run, in float32 and in float64 (computed once per model and optimiser)."""
  if (model_name, optimizer) not in _reference:
    config, batches = sized(model_name, CONFIG)
    config.optimizer = optimizer
    run = testing.build(model_name, "single", 1, 1, config, GLOBAL_BATCH)
    initial = jax.tree.map(np.asarray, run.scheme.state.params)
    _, losses, variables = testing.train_steps(run, batches)
    exact = testing.float64_steps(model_name, "single", 1, 1, config, GLOBAL_BATCH, batches)
    _reference[model_name, optimizer] = Reference(initial, losses, variables, exact)
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
      # The ResNets: every conv's filters split over "model", identity and projection
      # shortcuts added on the device's own channels, the classifier on its rows of the pooled
      # channels (owt: gathered, then sliced); pre-activation with its unsplit input batch norm.
      ("resnet_model_1x2", "resnet_tiny", "model", 1, 2),
      ("resnet_data_4x1_sync_batch_norm", "resnet_tiny", "data", 4, 1,
       dict(sync_batch_norm=True)),
      ("resnet_hybrid_2x2_sync_batch_norm", "resnet_tiny", "hybrid", 2, 2,
       dict(sync_batch_norm=True)),
      ("resnet_owt_2x4_sync_batch_norm", "resnet_tiny", "owt", 2, 4,
       dict(sync_batch_norm=True)),
      ("resnet_owt_2x4_variant_b_sync_batch_norm", "resnet_tiny", "owt", 2, 4,
       dict(sync_batch_norm=True, owt_variant="b")),
      ("resnet_cifar_model_1x4", "resnet_cifar_tiny", "model", 1, 4),
      ("resnet_cifar_hybrid_2x2_sync_batch_norm", "resnet_cifar_tiny", "hybrid", 2, 2,
       dict(sync_batch_norm=True)),
  )
  def test_three_steps_with_dropout_equal_single_device(self, model_name, scheme, data, model,
                                                        overrides=None):
    config, batches = sized(model_name, CONFIG)
    config.update(overrides or {})
    ref = reference(model_name, config.optimizer)
    run = testing.build(model_name, scheme, data, model, config, GLOBAL_BATCH)
    _, losses, variables = testing.train_steps(run, batches)

    moved = max(np.abs(a - b).max() for a, b in zip(jax.tree.leaves(ref.variables["params"]),
                                                     jax.tree.leaves(ref.initial)))
    self.assertGreater(moved, 1e-3)  # float32 rounding is far smaller than the updates.
    self.assertEqual(jax.tree.structure(variables), jax.tree.structure(ref.variables))
    numerics.assert_as_accurate((losses, variables), (ref.losses, ref.variables), ref.exact)

  def test_a_wrong_gradient_sum_is_not_taken_for_rounding(self):
    # The comparison above has the power to catch a scheme bug: here every gradient is summed
    # right but one, the classifier's bias (10 numbers), which misses device 1's part.
    right = collectives.allreduce_sum

    def wrong(tree, axes, algorithm="psum"):
      if np.shape(tree) == (10,):
        tree = jnp.where(jax.lax.axis_index(axes) == 1, 0.0, tree)
      return right(tree, axes, algorithm)

    ref = reference("alexnet_tiny")
    with mock.patch.object(collectives, "allreduce_sum", wrong):
      run = testing.build("alexnet_tiny", "data", 2, 1, CONFIG, GLOBAL_BATCH)
      _, losses, variables = testing.train_steps(run, BATCHES)
    with self.assertRaisesRegex(AssertionError, r"\['fc8'\]\['bias'\]: .* from float64"):
      numerics.assert_as_accurate((losses, variables), (ref.losses, ref.variables), ref.exact)

  @parameterized.named_parameters(
      ("hybrid_2x2", "alexnet_tiny", "hybrid", 2, 2),
      ("owt_2x4", "alexnet_owt_tiny", "owt", 2, 4),
  )
  def test_eval_sums_equal_single_device_with_padding(self, model_name, scheme, data, model):
    images, labels = BATCHES[0]
    weights = (np.arange(GLOBAL_BATCH) < 11).astype(np.float32)  # a partial last batch.

    def eval_sums(scheme, data, model, dtype="float32"):
      config = CONFIG.copy_and_resolve_references()
      config.dtype = dtype
      with jax.enable_x64(dtype == "float64"):
        run = testing.build(model_name, scheme, data, model, config, GLOBAL_BATCH)
        return jax.device_get(run.eval_step(run.scheme.eval_variables(run.scheme.state),
                                            *testing.put(run, images, labels, weights)))

    want, got = eval_sums("single", 1, 1), eval_sums(scheme, data, model)
    self.assertEqual(got["count"], 11)
    numerics.assert_as_accurate(got, want, eval_sums("single", 1, 1, "float64"))

  @parameterized.named_parameters(("single", "single", 1, 1), ("owt_2x4", "owt", 2, 4))
  def test_multi_crop_eval_averages_the_crops_softmaxes(self, scheme, data, model):
    crops = 3
    rng = np.random.RandomState(1)
    images = rng.randn(GLOBAL_BATCH, crops, *BATCHES[0][0].shape[1:]).astype(np.float32)
    labels, weights = BATCHES[0][1], np.ones(GLOBAL_BATCH, np.float32)

    def mean_of_softmaxes(dtype):
      config = CONFIG.copy_and_resolve_references()
      config.dtype = dtype
      with jax.enable_x64(dtype == "float64"):
        single = testing.build("alexnet_owt_tiny", "single", 1, 1, config, GLOBAL_BATCH)
        variables = single.scheme.eval_variables(single.scheme.state)
        apply = jax.jit(single.model.apply)  # op by op, each operation would compile alone.
        return np.mean([jax.nn.softmax(apply(
            variables, images[:, k], example_ids_B=common.example_ids(single.plan,
                                                                      GLOBAL_BATCH)))
            for k in range(crops)], axis=0)

    probs = {dtype: mean_of_softmaxes(dtype) for dtype in ("float32", "float64")}
    losses = {dtype: -np.log(p[np.arange(GLOBAL_BATCH), labels]).sum() for dtype, p in
              probs.items()}
    run = testing.build("alexnet_owt_tiny", scheme, data, model, CONFIG, GLOBAL_BATCH)
    eval_step = explicit.make_eval_step(run.model, run.plan, run.mesh,
                                        variable_specs=run.scheme.eval_specs, crops=crops)
    sums = jax.device_get(eval_step(run.scheme.eval_variables(run.scheme.state),
                                    *testing.put(run, images, labels, weights)))
    numerics.assert_as_accurate(sums["eval_loss"], losses["float32"], losses["float64"])
    self.assertEqual(sums["eval_top1"], np.sum(np.argmax(probs["float64"], -1) == labels))

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
    ref_losses = reference("alexnet_tiny").losses
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
    ref = reference("alexnet_tiny")
    single, hybrid = self.runs["single"], self.runs["hybrid"]
    # bfloat16 keeps 8 bits of mantissa (relative rounding 2⁻⁹ per operation): a loss of about
    # 2.3 is off by a few 1e-3, more than float32 rounding by far.
    np.testing.assert_allclose(single["losses"], ref.losses, rtol=1e-2)
    self.assertFalse(np.allclose(single["losses"], ref.losses, rtol=1e-6, atol=0))
    # The hybrid's bfloat16 rounding is the single device's, in another order.
    numerics.assert_as_accurate((hybrid["losses"], hybrid["variables"]),
                                (single["losses"], single["variables"]), ref.exact)

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
