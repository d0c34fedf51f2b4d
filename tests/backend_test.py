"""The gspmd and pmap backends give the explicit step's numbers."""

from tests import testing  # noqa: F401  (sets up 8 CPU devices first)

import tempfile  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
from absl.testing import absltest, parameterized  # noqa: E402

from hybrid_parallel import hlo_stats  # noqa: E402
from hybrid_parallel.errors import UserError  # noqa: E402
from tests import step_test  # noqa: E402  (its batches, config and single-device reference)
import train  # noqa: E402

GSPMD = step_test.CONFIG.copy_and_resolve_references()
GSPMD.backend = "gspmd"
PMAP = step_test.CONFIG.copy_and_resolve_references()
PMAP.backend = "pmap"


class GspmdTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("data_4x1", "alexnet_tiny", "data", 4, 1, {}),
      ("hybrid_2x2", "alexnet_tiny", "hybrid", 2, 2, {}),
      ("owt_2x4", "alexnet_owt_tiny", "owt", 2, 4, {}),
      ("owt_2x4_lars", "alexnet_owt_tiny", "owt", 2, 4, dict(optimizer="lars")),
      ("hybrid_2x2_sync_batch_norm", "alexnet_bn_tiny", "hybrid", 2, 2,
       dict(sync_batch_norm=True)),
  )
  def test_three_steps_with_dropout_equal_single_device(self, model_name, scheme, data, model,
                                                        overrides):
    _, expected_losses, expected = step_test.reference(model_name, overrides.get("optimizer",
                                                                                 "sgd"))
    config = GSPMD.copy_and_resolve_references()
    config.update(overrides)
    setup = testing.build(model_name, scheme, data, model, config, step_test.GLOBAL_BATCH)
    self.assertEqual(str(setup["mesh"].axis_types), "(Auto, Auto)")
    losses, variables = testing.train_steps(setup, step_test.BATCHES)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)
    for got, want in zip(jax.tree.leaves(variables), jax.tree.leaves(expected)):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 if overrides else 2e-7)

  def test_xla_inserts_the_collectives_itself(self):
    setup = testing.build("alexnet_owt_tiny", "owt", 2, 4, GSPMD, step_test.GLOBAL_BATCH)
    images, labels = testing.put(setup, *step_test.BATCHES[0])
    hlo = setup["train_step"].lower(setup["state"], images, labels).compile().as_text()
    # No shard_map, no collective in our code: every one of these was placed by XLA.
    self.assertGreater(hlo_stats.busiest_device_bytes(hlo, 8), 0)
    self.assertIn("all-reduce", hlo_stats.collective_stats(hlo, 8))

  def test_what_gspmd_cannot_express_is_refused(self):
    for overrides, message in ((dict(grad_reduce="ring"), "lets XLA choose the gradient"),
                               (dict(microbatches=2), "microbatches need the explicit"),
                               (dict(parallelism="averaging"), "partitions the synchronous")):
      config = GSPMD.copy_and_resolve_references()
      config.update(overrides)
      with self.assertRaisesRegex(UserError, message):
        testing.build("alexnet_tiny", config.parallelism if "parallelism" in overrides
                      else "data", 2, 1, config, step_test.GLOBAL_BATCH)


class PmapTest(parameterized.TestCase):

  def test_three_steps_with_dropout_equal_single_device(self):
    _, expected_losses, expected = step_test.reference("alexnet_tiny", "sgd")
    setup = testing.build("alexnet_tiny", "data", 4, 1, PMAP, step_test.GLOBAL_BATCH)
    losses, variables = testing.train_steps(setup, step_test.BATCHES)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)
    for got, want in zip(jax.tree.leaves(variables), jax.tree.leaves(expected)):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-7)

  def test_per_worker_batch_norm_equals_the_explicit_step(self):
    # Per-worker statistics differ from one device's, so the reference is the explicit 4×1 run.
    runs = {}
    for config in (step_test.CONFIG, PMAP):
      setup = testing.build("alexnet_bn_tiny", "data", 4, 1, config, step_test.GLOBAL_BATCH)
      runs[config.backend] = testing.train_steps(setup, step_test.BATCHES)
    (want_losses, want), (got_losses, got) = runs["explicit"], runs["pmap"]
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-6)
    self.assertIn("batch_stats", got)
    for got_leaf, want_leaf in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
      np.testing.assert_allclose(got_leaf, want_leaf, rtol=1e-5, atol=1e-6)

  def test_the_training_loop_runs_it_to_the_explicit_result(self):
    # train.py runs the steps inside jax.set_mesh(...), where pmap's own mesh must not clash.
    results = {}
    for backend in ("explicit", "pmap"):
      config = testing.tiny_config(parallelism="data", mesh=dict(data=2, model=1),
                                   backend=backend, global_batch_size=32, num_train_steps=3,
                                   eval_batch_size=120)
      with tempfile.TemporaryDirectory() as workdir:
        results[backend] = train.train_and_evaluate(config, workdir)
    for key, value in results["explicit"].items():
      self.assertAlmostEqual(results["pmap"][key], value, places=5)

  def test_what_the_examples_step_does_not_have_is_refused(self):
    for overrides, scheme, message in (
        (dict(), "hybrid", "'pmap' is the data-parallel baseline"),
        (dict(), "averaging", "'pmap' is the data-parallel baseline"),
        (dict(grad_reduce="tree"), "data", "reduces gradients with lax.pmean"),
        (dict(microbatches=2), "data", "microbatches need the explicit")):
      config = PMAP.copy_and_resolve_references()
      config.update(overrides)
      with self.assertRaisesRegex(UserError, message):
        testing.build("alexnet_tiny", scheme, 2, 2 if scheme == "hybrid" else 1, config,
                      step_test.GLOBAL_BATCH)


if __name__ == "__main__":
  absltest.main()
