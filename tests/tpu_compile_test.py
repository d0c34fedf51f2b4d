"""The real train step compiled for Colab's TPU v2-8 on this CPU (libtpu compiles without a TPU),
and the bytes its TPU program exchanges against the analytic minimum the CPU program sends."""

import importlib.util
import unittest

import jax
from absl.testing import absltest

import experiment
from hybrid_parallel import models
from benchmarks.speed import tpu_topologies
from hybrid_parallel.analysis import costmodel, hlo_stats
from tests import step_test, testing

BATCH = step_test.GLOBAL_BATCH


def _hybrid_program(*, devices=None):
  """alexnet_tiny's hybrid 2×2 train step, lowered and compiled for `devices` (default: this
  process's CPU devices), with the analytic minimum it should send."""
  spec = testing.resolve("alexnet_tiny", "hybrid", 2, 2, step_test.CONFIG, BATCH)
  # At the highest precision a TPU convolution keeps float32 operands, so XLA cannot gather them
  # in bfloat16 (which it does at the default precision: docs/tpu.md). The CPU program is
  # costmodel_test's, at the default precision (the same bytes; its compilation is cached).
  with jax.default_matmul_precision("highest" if devices else None):
    step = experiment.lower_train_step(spec, num_classes=10, devices=devices, **testing.SCHEDULE)
  lowered = step.lowered
  minimum = costmodel.traffic(models.ARCHITECTURES["alexnet_tiny"], step.run.plan,
                              global_batch=BATCH, image_size=testing.IMAGE_SIZE,
                              num_classes=10).total
  return lowered, lowered.compile().as_text(), minimum


def _sent(hlo: str, devices: int) -> dict[str, float]:
  return {kind: stats.bytes_per_device
          for kind, stats in hlo_stats.collective_stats(hlo, devices).items()}


@unittest.skipUnless(importlib.util.find_spec("libtpu"),
                     "libtpu is not installed (requirements-test.txt installs it; the GPU "
                     "machines' environment has none)")
class TpuCompileTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tpu = tpu_topologies.topology_devices("v2:2x2")

  def test_the_topologies_are_colabs_tpu_v2_and_v4s_chips(self):
    self.assertEqual([d.device_kind for d in self.tpu], ["TPU v2"] * 8)
    # A v4-8 as its 4 megacore chips, which jax.make_mesh accepts (it refuses v4's 8 cores).
    v4 = tpu_topologies.topology_devices("v4:2x2x1")
    self.assertEqual([d.device_kind for d in v4], ["TPU v4"] * 4)
    self.assertEqual(jax.make_mesh((2, 2), ("data", "model"), devices=v4).devices.size, 4)

  def test_hybrid_sends_the_minimum_but_for_the_reduce_scatters_tpu_runs_as_all_reduces(self):
    lowered, tpu_hlo, minimum = _hybrid_program(devices=self.tpu)
    _, cpu_hlo, _ = _hybrid_program()
    tpu, cpu = _sent(tpu_hlo, 4), _sent(cpu_hlo, 4)
    # The CPU program sends the minimum (costmodel_test): the model axis's all-gathers of the
    # activations and reduce-scatters of their gradients, the data axis's gradient all-reduce.
    self.assertBetween(sum(cpu.values()) - minimum, 0, 8 * BATCH + 64)
    self.assertGreater(cpu["reduce-scatter"], 0)
    # The program handed to XLA asks for those reduce-scatters on TPU too ...
    self.assertEqual(lowered.as_text(dialect="hlo").count(" reduce-scatter("), 3)
    # ... and XLA:TPU runs each as an all-reduce of the whole tensor, whose slice the device then
    # keeps: on a 2-device axis that is twice the reduce-scatter's bytes. Everything else is the
    # CPU program's, to the byte.
    self.assertEqual(tpu["reduce-scatter"], 0)
    self.assertEqual(tpu["all-reduce"], cpu["all-reduce"] + 2 * cpu["reduce-scatter"])
    self.assertEqual(tpu["all-gather"], cpu["all-gather"])
    # So, that one choice aside, the TPU program sends the analytic minimum: the gradient
    # all-reduce and the activations' all-gathers and reduce-scatters, as the CPU's does.
    self.assertBetween(sum(tpu.values()) - cpu["reduce-scatter"] - minimum, 0, 8 * BATCH + 64)


if __name__ == "__main__":
  absltest.main()
