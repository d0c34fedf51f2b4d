"""The real train step compiled for an 8-GPU H100 node, and for two, on this CPU (JAX's CUDA plugin
compiles without a GPU or a driver): the bytes each device sends against the analytic minimum,
and which of them cross hosts."""

import unittest

from absl.testing import absltest

import experiment
from hybrid_parallel import models
from benchmarks.speed import gpu_topologies
from hybrid_parallel.analysis import costmodel, hlo_stats
from tests import step_test, testing

BATCH = step_test.GLOBAL_BATCH


def _program(devices, model_name: str, scheme: str, data: int, model: int, *, batch: int,
             config=None):
  """`model_name`'s `scheme` data × model step compiled for `devices` at global `batch`, with
  the analytic minimum."""
  spec = testing.resolve(model_name, scheme, data, model, config or step_test.CONFIG, batch)
  step = experiment.lower_train_step(
      spec, num_classes=10, devices=gpu_topologies.mesh_devices(devices, data, model),
      **testing.SCHEDULE)
  minimum = costmodel.traffic(models.ARCHITECTURES[model_name], step.run.plan,
                              global_batch=batch, image_size=testing.IMAGE_SIZE, num_classes=10)
  return step, step.lowered.compile().as_text(), minimum


def _hybrid_program(devices, data: int):
  """alexnet_tiny's hybrid data × 2 step compiled for `devices`, with the analytic minimum."""
  step, hlo, minimum = _program(devices, "alexnet_tiny", "hybrid", data, 2,
                                batch=data * BATCH // 2)
  return step.run.mesh, hlo, minimum


@unittest.skipIf(gpu_topologies.unavailable_reason(),
                 "JAX's CUDA plugin is not installed (requirements-test.txt installs it, with "
                 "ptxas and libdevice, on Python >= 3.12)")
class GpuCompileTest(absltest.TestCase):

  def test_hybrid_sends_the_analytic_minimum_on_an_h100_node(self):
    devices = gpu_topologies.topology_devices("h100", "1x1x8")
    self.assertEqual([d.device_kind for d in devices], ["NVIDIA H100 80GB HBM3"] * 8)
    _, hlo, minimum = _hybrid_program(devices, data=2)
    sent = {kind: s.bytes_per_device for kind, s in hlo_stats.collective_stats(hlo, 4).items()}
    # As on the CPU (costmodel_test): the model axis's all-gathers of the activations and
    # reduce-scatters of their gradients, the data axis's gradient all-reduce — and beyond the
    # minimum only the scalar metrics and the finiteness verdict (under 8 bytes an example).
    self.assertBetween(sum(sent.values()) - minimum.total, 0, 8 * BATCH + 64)
    self.assertGreater(sent["reduce-scatter"], 0)
    self.assertEqual(sent["reduce-scatter"], sent["all-gather"])  # each gather's transpose.

  def test_on_two_nodes_only_the_data_axis_crosses_the_hosts(self):
    devices = gpu_topologies.topology_devices("h100", "1x2x8")
    self.assertEqual(sorted({d.process_index for d in devices}), [0, 1])
    mesh, hlo, minimum = _hybrid_program(devices, data=4)  # 4 × 2: two data rows per node.
    self.assertEqual(gpu_topologies.axes_crossing_hosts(mesh), ["data"])
    ops = [op for op in hlo_stats.collectives(hlo, 8) if max(op.sent) > 0]
    crossing = [op for op in ops if gpu_topologies.crosses_hosts(op, mesh)]
    # What crosses is the gradient all-reduce over "data" (and the metrics' sums); the model
    # axis's activation gathers stay on NVLink.
    self.assertEqual({op.kind for op in crossing}, {"all-reduce"})
    self.assertTrue(all(op.kind == "all-reduce" or not gpu_topologies.crosses_hosts(op, mesh)
                        for op in ops))
    crossing_bytes = sum(sum(op.sent) / 8 for op in crossing)
    self.assertBetween(crossing_bytes - minimum.gradients, 0, 8 * BATCH + 64)

  def test_owt_passes_are_priced_with_their_gradients_across_the_hosts(self):
    # owt (c) on 4 × 4 over two nodes: its data axis crosses them. The pass model prices
    # transfers by purpose, so the program's collectives become the analytic minimum (which the
    # program sends: the test above), the gradients on the network — once dropped from the step.
    config = step_test.CONFIG.copy_and_resolve_references()
    batch = 4 * BATCH  # (c) splits each device's rows into 4 passes: 4 rows each.
    config.owt_variant, config.eval_batch_size = "c", batch
    devices = gpu_topologies.topology_devices("h100", "1x2x8")
    step, hlo, minimum = _program(devices, "alexnet_owt_tiny", "owt", 4, 4, batch=batch,
                                  config=config)
    arch, plan = models.ARCHITECTURES["alexnet_owt_tiny"], step.run.plan
    transfers = gpu_topologies.time_model_transfers(
        hlo, mesh=step.run.mesh, plan=plan, arch=arch, global_batch=batch,
        image_size=testing.IMAGE_SIZE, num_classes=10, dtype="float32", owt_variant="c")
    gradients = [t for t in transfers if t.purpose == "gradients"]
    self.assertTrue(all(t.crosses_nodes for t in gradients))
    # What is priced on the network is what the compiled program's host-crossing all-reduces
    # send, beyond it only the scalar metrics and the finiteness verdict (as above).
    crossing = [op for op in hlo_stats.collectives(hlo, 16)
                if op.kind == "all-reduce" and gpu_topologies.crosses_hosts(op, step.run.mesh)]
    self.assertBetween(sum(sum(op.sent) / 16 for op in crossing)
                       - sum(map(costmodel.bytes_sent, gradients)), 0, 8 * batch + 64)
    machine = gpu_topologies.calibrated_node("h100", "1x2x8", model="alexnet_owt",
                                             dtype="float32",
                                             measured=gpu_topologies.one_gpu_rows())
    t = costmodel.step_time(arch, plan, machine, global_batch=batch,
                            image_size=testing.IMAGE_SIZE, num_classes=10, dtype="float32",
                            transfers=transfers, owt_variant="c")
    network = sum(costmodel.transfer_time(g, machine) for g in gradients)
    self.assertGreater(network, 0)
    self.assertGreaterEqual(t["step_s"], t["compute_s"] + network)


if __name__ == "__main__":
  absltest.main()
