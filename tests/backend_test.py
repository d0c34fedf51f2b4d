"""The gspmd and pmap backends give the explicit step's numbers."""

import tempfile

import jax
import numpy as np
from absl.testing import absltest, parameterized

import train
from hybrid_parallel.analysis import hlo_stats
from hybrid_parallel.errors import UserError
from tests import step_test, testing

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
    run = testing.build(model_name, scheme, data, model, config, step_test.GLOBAL_BATCH)
    self.assertEqual(str(run.mesh.axis_types), "(Auto, Auto)")
    _, losses, variables = testing.train_steps(run, step_test.BATCHES)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)
    for got, want in zip(jax.tree.leaves(variables), jax.tree.leaves(expected)):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 if overrides else 2e-7)

  def test_xla_inserts_the_collectives_itself(self):
    run = testing.build("alexnet_owt_tiny", "owt", 2, 4, GSPMD, step_test.GLOBAL_BATCH)
    images, labels = testing.put(run, *step_test.BATCHES[0])
    hlo = run.scheme.train_step.lower(run.scheme.state, images, labels).compile().as_text()
    # No shard_map, no collective in our code: every one of these was placed by XLA.
    self.assertGreater(hlo_stats.busiest_device_bytes(hlo, 8), 0)
    self.assertIn("all-reduce", hlo_stats.collective_stats(hlo, 8))

  def test_what_gspmd_cannot_express_is_refused(self):
    for overrides, message in (
        (dict(grad_reduce="ring"), "backend 'gspmd' lets XLA place the gradient sum; "
         "grad_reduce 'ring' needs the explicit backend."),
        (dict(microbatches=2), "microbatches = 2 needs the explicit backend, not 'gspmd'."),
        (dict(parallelism="averaging"), "backend 'gspmd' runs the schemes single, data, model, "
         "hybrid, owt; parallelism 'averaging' needs the explicit backend."),
        (dict(model="alexnet_bn_tiny"), "backend 'gspmd' normalises batch-norm layers over the "
         "whole batch; set sync_batch_norm = True")):
      config = GSPMD.copy_and_resolve_references()
      config.update(overrides)
      with self.assertRaisesRegex(UserError, message):
        testing.build(config.model, config.parallelism if "parallelism" in overrides
                      else "data", 2, 1, config, step_test.GLOBAL_BATCH)


class PmapTest(parameterized.TestCase):

  def test_three_steps_with_dropout_equal_single_device(self):
    _, expected_losses, expected = step_test.reference("alexnet_tiny", "sgd")
    run = testing.build("alexnet_tiny", "data", 4, 1, PMAP, step_test.GLOBAL_BATCH)
    _, losses, variables = testing.train_steps(run, step_test.BATCHES)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)
    for got, want in zip(jax.tree.leaves(variables), jax.tree.leaves(expected)):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-7)

  def test_per_worker_batch_norm_equals_the_explicit_step(self):
    # Per-worker statistics differ from one device's, so the reference is the explicit 4×1 run.
    runs = {}
    for config in (step_test.CONFIG, PMAP):
      run = testing.build("alexnet_bn_tiny", "data", 4, 1, config, step_test.GLOBAL_BATCH)
      runs[config.backend] = testing.train_steps(run, step_test.BATCHES)[1:]
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
        (dict(), "hybrid", "backend 'pmap' runs the schemes single, data; parallelism 'hybrid' "
         "needs the explicit backend."),
        (dict(), "averaging", "backend 'pmap' runs the schemes single, data; parallelism "
         "'averaging' needs the explicit backend."),
        (dict(grad_reduce="tree"), "data", "backend 'pmap' sums gradients with lax.pmean; "
         "grad_reduce 'tree' needs the explicit backend."),
        (dict(microbatches=2), "data", "microbatches = 2 needs the explicit backend, not "
         "'pmap'.")):
      config = PMAP.copy_and_resolve_references()
      config.update(overrides)
      with self.assertRaisesWithLiteralMatch(UserError, message):
        testing.build("alexnet_tiny", scheme, 2, 2 if scheme == "hybrid" else 1, config,
                      step_test.GLOBAL_BATCH)


if __name__ == "__main__":
  absltest.main()
