"""Krizhevsky 2014's owt variants (b) and (c): with one FC update per step they are (a); with an
FC update per pass they are the single-device reference of the variable batch size."""

import jax
import numpy as np
from absl.testing import absltest, parameterized

import experiment
from hybrid_parallel import models, train_state
from hybrid_parallel.errors import UserError
from hybrid_parallel.steps import variable_batch
from tests import numerics, testing

GLOBAL_BATCH = 32  # 4 rows per device on 2×4 (a multiple of 4, as (c) needs) and on 1×8.
STEPS = 3
CONFIG = testing.tiny_config(model="alexnet_owt_tiny", base_learning_rate=0.05,
                             reference_batch_size=GLOBAL_BATCH, lr_decay="constant")
BATCHES = testing.random_batches(STEPS, GLOBAL_BATCH, seed=5)
_runs = {}


def single_device(dtype="float32"):
  """The plain single-device run: losses and variables (computed once per dtype)."""
  if dtype not in _runs:
    if dtype == "float64":
      _runs[dtype] = testing.float64_steps("alexnet_owt_tiny", "single", 1, 1, CONFIG,
                                           GLOBAL_BATCH, BATCHES)
    else:
      run = testing.build("alexnet_owt_tiny", "single", 1, 1, CONFIG, GLOBAL_BATCH)
      _runs[dtype] = testing.train_steps(run, BATCHES)[1:]
  return _runs[dtype]


def reference(variant, data, model, fc_updates_per_step, dtype="float32"):
  """The single-device variable-batch step over the passes `variant` makes on a data × model
  mesh: losses and variables (float64: see tests/numerics.py)."""
  config = CONFIG.copy_and_resolve_references()
  config.update(owt_variant=variant, fc_updates_per_step=fc_updates_per_step, dtype=dtype)
  with jax.enable_x64(dtype == "float64"):
    # The distributed run's schedule and optimiser (with one FC update per pass or per step).
    spec = testing.resolve(config.model, "owt", data, model, config, GLOBAL_BATCH)
    net = models.build(config.model, 10, image_size=testing.IMAGE_SIZE, dtype=dtype)
    schedule = experiment.make_schedule(spec, steps_per_epoch=10, total_steps=100)
    tx = experiment.make_optimizer(spec, schedule)
    state = train_state.initialize(net, tx, (1, testing.IMAGE_SIZE, testing.IMAGE_SIZE, 3),
                                   seed=config.seed)
    rows = variable_batch.pass_rows(variant, data=data, model=model, global_batch=GLOBAL_BATCH)
    step = variable_batch.make_reference_step(net, tx, rows=rows,
                                              fc_updates_per_step=fc_updates_per_step)
    losses = []
    for images, labels in BATCHES:
      state, metrics = step(state, images, labels)
      losses.append(float(metrics["train_loss"]))
    return np.array(losses), jax.tree.map(np.asarray, {"params": state.params})


def distributed(variant, data, model, fc_updates_per_step):
  config = CONFIG.copy_and_resolve_references()
  config.update(owt_variant=variant, fc_updates_per_step=fc_updates_per_step)
  run = testing.build("alexnet_owt_tiny", "owt", data, model, config, GLOBAL_BATCH)
  return testing.train_steps(run, BATCHES)[1:]


class VariantsTest(parameterized.TestCase):

  @parameterized.named_parameters(("b_1x8", "b", 1, 8), ("c_2x4", "c", 2, 4))
  def test_one_fc_update_per_step_is_scheme_a(self, variant, data, model):
    # (a) equals the single-device step (step_test); so must (b) and (c) summed over passes.
    numerics.assert_as_accurate(distributed(variant, data, model, 1), single_device(),
                                single_device("float64"))

  # (b) on 2×4 here, on 1×8 above: the data axis sums each pass's FC gradients too.
  @parameterized.named_parameters(("b_2x4", "b", 2, 4), ("c_2x4", "c", 2, 4))
  def test_an_fc_update_per_pass_is_the_reference(self, variant, data, model):
    got = distributed(variant, data, model, model)
    numerics.assert_as_accurate(got, reference(variant, data, model, model),
                                reference(variant, data, model, model, "float64"))
    # and not (a): after the first step the FC layers have moved K times.
    losses, variables = got
    plain_losses, plain = single_device()
    self.assertGreater(abs(losses[1] - plain_losses[1]), 1e-4)
    self.assertGreater(np.abs(variables["params"]["fc7"]["dense"]["kernel"] -
                              plain["params"]["fc7"]["dense"]["kernel"]).max(), 1e-4)

  def test_the_reference_with_one_pass_is_the_plain_step(self):
    plain = lambda run: (run[0], {"params": run[1]["params"]})
    numerics.assert_as_accurate(reference("b", 1, 1, 1), plain(single_device()),
                                plain(single_device("float64")))

  def test_pass_rows(self):
    # 2 data groups × 2 workers × 4 rows: worker rows [0..3], [4..7] | [8..11], [12..15].
    np.testing.assert_array_equal(
        variable_batch.pass_rows("b", data=2, model=2, global_batch=16),
        [[0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]])
    np.testing.assert_array_equal(
        variable_batch.pass_rows("c", data=2, model=2, global_batch=16),
        [[0, 1, 4, 5, 8, 9, 12, 13], [2, 3, 6, 7, 10, 11, 14, 15]])

  @parameterized.named_parameters(
      ("outside_owt", dict(variant="b", scheme="hybrid", model_axis=2, fc_updates_per_step=1),
       "owt_variant 'b' is a way of running owt's FC layers; parallelism 'hybrid' has no such "
       "choice"),
      ("updates_not_k", dict(variant="c", scheme="owt", model_axis=4, fc_updates_per_step=2),
       "fc_updates_per_step must be 1 or the model-axis size 4"),
      ("updates_without_passes", dict(variant="a", scheme="owt", model_axis=4,
                                      fc_updates_per_step=4),
       "fc_updates_per_step > 1 needs the FC passes of owt_variant 'b' or 'c'"),
      ("gspmd", dict(variant="b", scheme="owt", model_axis=4, fc_updates_per_step=1,
                     backend="gspmd"), "owt_variant 'b' needs the explicit backend"),
      ("rows_not_dividing", dict(variant="c", scheme="owt", model_axis=4, fc_updates_per_step=1,
                                 local_batch=6), "owt_variant 'c' sends each worker's 6 rows"),
  )
  def test_bad_combinations(self, settings, message):
    with self.assertRaisesRegex(UserError, message):
      variable_batch.check(settings.pop("variant"), **settings)


if __name__ == "__main__":
  absltest.main()
