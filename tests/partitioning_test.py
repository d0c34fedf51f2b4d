"""THE table: each scheme's PartitionSpecs, gradient axes and batch layout."""

from absl.testing import absltest, parameterized
from jax.sharding import PartitionSpec as P

from hybrid_parallel import partitioning
from hybrid_parallel.errors import UserError
from tests import testing
from tests.models_test import abstract_params

W = P()  # whole on every device
CONV_SPLIT = {"kernel": P(None, None, None, "model"), "bias": P("model")}
CONV_WHOLE = {"kernel": W, "bias": W}
FC_SPLIT = {"kernel": P(None, "model"), "bias": P("model")}
FC_WHOLE = {"kernel": W, "bias": W}
CLASSIFIER_SPLIT = {"kernel": P("model", None), "bias": W}


def expected_specs(conv, fc, classifier):
  specs = {f"conv{i}": {"conv": conv} for i in range(1, 6)}
  specs.update(fc6={"dense": fc}, fc7={"dense": fc}, fc8=classifier)
  return specs


class PartitioningTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("single", "single", 1, 1, expected_specs(CONV_WHOLE, FC_WHOLE, FC_WHOLE)),
      ("data", "data", 4, 1, expected_specs(CONV_WHOLE, FC_WHOLE, FC_WHOLE)),
      ("model", "model", 1, 2, expected_specs(CONV_SPLIT, FC_SPLIT, CLASSIFIER_SPLIT)),
      ("hybrid", "hybrid", 2, 2, expected_specs(CONV_SPLIT, FC_SPLIT, CLASSIFIER_SPLIT)),
      ("owt", "owt", 2, 4, expected_specs(CONV_WHOLE, FC_SPLIT, CLASSIFIER_SPLIT)),
  )
  def test_param_specs(self, scheme, data, model, expected):
    plan = partitioning.make_plan(scheme, data, model)
    specs = partitioning.param_specs(abstract_params("alexnet", 1000), plan, "fc8")
    self.assertEqual(specs, expected)

  @parameterized.named_parameters(
      ("single", "single", 1, 1, P(), (), (), 1),
      ("data", "data", 4, 1, P("data"), ("data",), ("data",), 4),
      ("model", "model", 1, 2, P(), (), (), 1),
      ("hybrid", "hybrid", 2, 2, P("data"), ("data",), ("data",), 2),
      ("owt", "owt", 2, 4, P(("data", "model")), ("data", "model"), ("data",), 8),
      ("owt_one_data_group", "owt", 1, 8, P("model"), ("model",), (), 8),
  )
  def test_batch_and_gradient_axes(self, scheme, data, model, batch_spec, conv_axes, fc_axes,
                                   divisor):
    plan = partitioning.make_plan(scheme, data, model)
    self.assertEqual(plan.batch_spec, batch_spec)
    self.assertEqual(plan.batch_divisor, divisor)
    axes = partitioning.map_with_grad_axes(lambda _, a: a, abstract_params("alexnet", 10), plan)
    self.assertEqual(axes["conv3"]["conv"]["kernel"], conv_axes)
    self.assertEqual(axes["fc6"]["dense"]["bias"], fc_axes)
    self.assertEqual(axes["fc8"]["kernel"], fc_axes)

  @parameterized.named_parameters(
      ("unknown", "pipeline", 1, 1, "unknown parallelism 'pipeline'"),
      ("single_on_two", "single", 2, 1, "'single' needs a 1×1 mesh, got a 2×1 mesh"),
      ("data_with_model_axis", "data", 2, 2, "'data' needs mesh.model = 1"),
      ("model_with_data_axis", "model", 2, 2, "'model' needs mesh.data = 1"),
  )
  def test_bad_plans(self, scheme, data, model, message):
    with self.assertRaisesRegex(UserError, message):
      partitioning.make_plan(scheme, data, model)

  def test_batch_must_split_over_the_batch_devices(self):
    partitioning.check_batch(partitioning.make_plan("owt", 2, 4), 1024)
    with self.assertRaisesRegex(UserError, "global_batch_size 100 cannot be split evenly over "
                                "the 8 devices"):
      partitioning.check_batch(partitioning.make_plan("owt", 2, 4), 100)

  def test_microbatches_must_split_each_devices_batch(self):
    partitioning.check_batch(partitioning.make_plan("data", 4, 1), 64, microbatches=16)
    with self.assertRaisesRegex(UserError, "each device's 16 examples cannot be split into 3 "
                                "microbatches; use a global_batch_size that is a multiple of 12"):
      partitioning.check_batch(partitioning.make_plan("data", 4, 1), 64, microbatches=3)

  @parameterized.named_parameters(
      ("batch_norm", "alexnet_bn_tiny", {}, "parallelism 'averaging' keeps no batch-norm"),
      ("microbatches", "alexnet_tiny", {"microbatches": 2},
       "microbatches applies to the synchronous schemes, not 'averaging'"),
      ("skip", "alexnet_tiny", {"skip_nonfinite_steps": True},
       "skip_nonfinite_steps applies to the synchronous schemes, not 'averaging'"),
  )
  def test_local_sgd_refuses_what_it_does_not_support(self, model_name, overrides, message):
    with self.assertRaisesRegex(UserError, message):
      testing.build(model_name, "averaging", 2, 1, testing.tiny_config(**overrides), 16)


if __name__ == "__main__":
  absltest.main()
