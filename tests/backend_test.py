"""The gspmd and pmap backends give the explicit step's numbers (the training loop on each, through
main.py, with every source: tests/paths_test.py)."""

from absl.testing import absltest, parameterized

from hybrid_parallel.analysis import hlo_stats
from hybrid_parallel.errors import UserError
from tests import numerics, step_test, testing

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
      ("resnet_hybrid_2x2_sync_batch_norm", "resnet_tiny", "hybrid", 2, 2,
       dict(sync_batch_norm=True)),
  )
  def test_three_steps_with_dropout_equal_single_device(self, model_name, scheme, data, model,
                                                        overrides):
    ref = step_test.reference(model_name, overrides.get("optimizer", "sgd"))
    config = GSPMD.copy_and_resolve_references()
    config.update(overrides)
    run = testing.build(model_name, scheme, data, model, config, step_test.GLOBAL_BATCH)
    self.assertEqual(str(run.mesh.axis_types), "(Auto, Auto)")
    _, losses, variables = testing.train_steps(run, step_test.BATCHES)
    numerics.assert_as_accurate((losses, variables), (ref.losses, ref.variables), ref.exact)

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
    ref = step_test.reference("alexnet_tiny", "sgd")
    run = testing.build("alexnet_tiny", "data", 4, 1, PMAP, step_test.GLOBAL_BATCH)
    _, losses, variables = testing.train_steps(run, step_test.BATCHES)
    numerics.assert_as_accurate((losses, variables), (ref.losses, ref.variables), ref.exact)

  def test_per_worker_batch_norm_equals_the_explicit_step(self):
    # Per-worker statistics differ from one device's, so the reference is the explicit 4×1 run.
    runs = {}
    for config in (step_test.CONFIG, PMAP):
      run = testing.build("alexnet_bn_tiny", "data", 4, 1, config, step_test.GLOBAL_BATCH)
      runs[config.backend] = testing.train_steps(run, step_test.BATCHES)[1:]
    self.assertIn("batch_stats", runs["pmap"][1])
    exact = testing.float64_steps("alexnet_bn_tiny", "data", 4, 1, step_test.CONFIG,
                                  step_test.GLOBAL_BATCH, step_test.BATCHES)
    numerics.assert_as_accurate(runs["pmap"], runs["explicit"], exact)

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
