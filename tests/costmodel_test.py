"""The cost model: AlexNet arithmetic, α-β formulas, traffic equal to the compiled step's."""

import math

from absl.testing import absltest, parameterized

import experiment

from hybrid_parallel import models, partitioning
from hybrid_parallel.analysis import costmodel, hardware, hlo_stats
from tests import step_test, testing, variable_batch_test

OWT = models.ARCHITECTURES["alexnet_owt"]
LINK = hardware.Link("test", alpha=1e-5, beta=1e-9, gamma=1e-10)


class ArithmeticTest(parameterized.TestCase):

  def test_one_column_alexnet(self):
    layers = costmodel.layers(OWT, 224, 1000)
    macs = sum(layer.macs for layer in layers)
    self.assertEqual(sum(layer.params for layer in layers), 61_100_840)  # = models' count
    self.assertAlmostEqual(macs / 1e6, 714.2, places=1)  # the published widths' arithmetic
    conv = sum(layer.macs for layer in layers if layer.kind == "conv")
    self.assertAlmostEqual(conv / macs, 0.918, places=3)  # convs 91.8% of the compute
    self.assertAlmostEqual(costmodel.training_flops_per_image(OWT, 224, 1000) / 1e9, 4.29,
                           places=2)

  def test_two_column_alexnet(self):
    layers = costmodel.layers(models.ARCHITECTURES["alexnet"], 224, 1000)
    self.assertEqual(sum(layer.params for layer in layers), 60_965_224)
    self.assertAlmostEqual(sum(layer.macs for layer in layers) / 1e6, 724.4, places=1)

  @parameterized.named_parameters(("k2", 2, 244), ("k4", 4, 367), ("k8", 8, 428))
  def test_data_parallel_ring_bytes(self, k, megabytes):
    # The published widths' arithmetic: ≈ 244 / 367 / 428 MB per worker for K = 2 / 4 / 8
    # (one-column net, 61.1 M).
    traffic = costmodel.traffic(OWT, partitioning.make_plan("data", k, 1), global_batch=128 * k,
                                image_size=224, num_classes=1000)
    self.assertAlmostEqual(traffic.total / 1e6, megabytes, delta=1)

  @parameterized.named_parameters(("k2", 2, 10, 9), ("k4", 4, 15, 28), ("k8", 8, 17, 66))
  def test_owt_conv_gradients_and_fc6_gather(self, k, conv_mb, fc6_mb):
    # The same arithmetic: owt ≈ 10 / 15 / 17 MB of conv gradients plus 9 / 28 / 66 MB of gathered
    # FC activations (fc6's input); our total adds fc7's input and the logits.
    plan = partitioning.make_plan("owt", 1, k)
    traffic = costmodel.traffic(OWT, plan, global_batch=128 * k, image_size=224,
                                num_classes=1000)
    self.assertAlmostEqual(traffic.gradients / 1e6, conv_mb, delta=0.5)
    fc6_input = 128 * k * 6 * 6 * 256 * 4
    self.assertAlmostEqual(2 * (k - 1) / k * fc6_input / 1e6, fc6_mb, delta=0.5)
    self.assertGreater(traffic.activations, 2 * (k - 1) / k * fc6_input)


class FormulaTest(parameterized.TestCase):

  def test_thakur_formulas(self):
    n, p = 1e6, 8
    a, b, g = LINK.alpha, LINK.beta, LINK.gamma
    expected = {
        "ring": 2 * 7 * a + 2 * n * 7 / 8 * b + n * 7 / 8 * g,
        "butterfly": 2 * 3 * a + 2 * n * 7 / 8 * b + n * 7 / 8 * g,
        "tree": 2 * 3 * (a + n * b) + 3 * n * g,
        "parameter_server": 2 * 7 * (a + n * b) + 7 * n * g,
    }
    for algorithm, seconds in expected.items():
      self.assertAlmostEqual(costmodel.allreduce_time(algorithm, n, p, link=LINK), seconds)
    self.assertEqual(costmodel.allreduce_time("ring", n, 1, link=LINK), 0.0)

  def test_ring_beats_tree_beats_parameter_server_on_large_messages(self):
    times = [costmodel.allreduce_time(alg, 244e6, 64, link=LINK)
             for alg in ("ring", "tree", "parameter_server")]
    self.assertEqual(times, sorted(times))
    self.assertGreater(times[2] / times[1], 63 / math.log2(64) * 0.9)


def machine(link, **how) -> hardware.Machine:
  """8 devices of 1 TFLOP/s on `link`, at full efficiency."""
  device = hardware.Device("test", {"float32": 1e12}, 1e9, "a test device")
  return hardware.Machine("test", device, devices_per_node=8, node_link=link, **how)


class TimeModelTest(absltest.TestCase):
  PLAN = partitioning.make_plan("owt", 1, 8)

  def time(self, link, variant, updates=1, **how):
    return costmodel.step_time(OWT, self.PLAN, machine(link, **how), global_batch=1024,
                               image_size=224, num_classes=1000, owt_variant=variant,
                               fc_updates_per_step=updates)

  def test_a_machine_calibrated_on_its_one_device_time_predicts_it(self):
    single = partitioning.make_plan("single", 1, 1)
    flops = costmodel.training_flops_per_image(OWT, 224, 1000) * 128
    m = machine(LINK, step_overhead_s=0.01).calibrated(flops_per_step=flops,
                                                       seconds_per_step=0.5, dtype="float32",
                                                       source="test")
    t = costmodel.step_time(OWT, single, m, global_batch=128, image_size=224, num_classes=1000)
    self.assertAlmostEqual(t["step_s"], 0.5)
    self.assertAlmostEqual(m.efficiency, flops / 0.49 / 1e12)

  def test_free_links_leave_the_compute(self):
    free = hardware.Link("free", alpha=0.0, beta=0.0)
    for variant in "abc":
      t = self.time(free, variant)
      self.assertAlmostEqual(t["step_s"], t["compute_s"])
      self.assertAlmostEqual(t["communication_s"], 0.0)

  def test_passes_hide_their_transfers_behind_the_fc_compute(self):
    # (c)'s passes move the same bytes as (a)'s gather, but overlap them with compute.
    slow = hardware.Link("slow", alpha=1e-5, beta=1 / 2e9)
    a, c = self.time(slow, "a"), self.time(slow, "c")
    self.assertAlmostEqual(a["compute_s"], c["compute_s"])
    self.assertLess(c["communication_s"], a["communication_s"])
    # (b)'s root sends K − 1 messages one after another: slower per pass than (c)'s all-gather.
    self.assertGreater(self.time(slow, "b")["step_s"], c["step_s"])

  def test_how_the_implementation_moved_data(self):
    n, p = 244e6, 4
    gradients = costmodel.Transfer("gradients", "allreduce", n, p)
    activations = costmodel.Transfer("activations", "gather", n, p)
    plain = machine(LINK)
    ring = costmodel.allreduce_time("ring", n, p, link=LINK)
    self.assertAlmostEqual(costmodel.transfer_time(gradients, plain), ring)
    # Through host memory: every copy crosses the link twice, one after the other (the sum's
    # arithmetic, γ, is done once).
    staged = machine(LINK, host_staged=True)
    reduced = n * (p - 1) / p * LINK.gamma
    self.assertAlmostEqual(costmodel.transfer_time(activations, staged),
                           2 * (costmodel.gather_scatter_time(n, p, LINK) - reduced) + reduced)
    # Two devices behind one uplink share its bandwidth.
    shared = machine(LINK, devices_per_uplink=2)
    self.assertAlmostEqual(costmodel.transfer_time(gradients, shared) - ring,
                           2 * n * (p - 1) / p * LINK.beta)
    # Yadan et al.'s data parallelism: gradients to the host, which sums p of them, and the
    # parameters back to every device.
    host = hardware.Link("host", alpha=0.0, beta=0.0, gamma=1e-11)
    yadan = machine(LINK, sends_parameters=True, host_memory=host)
    self.assertAlmostEqual(costmodel.transfer_time(gradients, yadan),
                           2 * (LINK.alpha + n * LINK.beta) + (p + 1) * n * 1e-11)

  def test_the_pass_model_refuses_a_program_s_collectives(self):
    # It splits the transfers by purpose; a program's collectives have none and were once
    # dropped from the step without a word (owt (c) across two nodes priced without its
    # gradients).
    program = [costmodel.Transfer("program", "sent", 1e8, 8)]
    for variant in "bc":
      with self.assertRaisesRegex(ValueError, "analytic_transfers"):
        costmodel.step_time(OWT, self.PLAN, machine(LINK), global_batch=1024, image_size=224,
                            num_classes=1000, owt_variant=variant, transfers=program)
    # (a) is one stage: a program's collectives are what it prices.
    t = costmodel.step_time(OWT, self.PLAN, machine(LINK), global_batch=1024, image_size=224,
                            num_classes=1000, transfers=program)
    self.assertAlmostEqual(t["communication_s"], LINK.alpha + 1e8 * LINK.beta)

  def test_an_overlapped_transfer_costs_only_what_outlasts_the_compute(self):
    link = hardware.Link("1 GB/s", alpha=0.0, beta=1e-9)
    second = lambda overlapped: costmodel.Transfer("program", "sent", 1e9, 8,
                                                   overlapped=overlapped)
    m = machine(link)
    self.assertAlmostEqual(costmodel.with_transfers(2.0, [second(True)], m)["step_s"], 2.0)
    self.assertAlmostEqual(costmodel.with_transfers(0.5, [second(True)], m)["step_s"], 1.0)
    self.assertAlmostEqual(costmodel.with_transfers(0.5, [second(False)], m)["step_s"], 1.5)


  def test_an_averaging_meeting_sends_what_local_sgd_traffic_counts(self):
    # On a link with only bandwidth, a meeting's seconds are its bytes: parameters and momenta,
    # as the compiled programs send them (comm_volume's local-SGD rows), every `every` steps.
    m = machine(hardware.Link("1 GB/s", alpha=0.0, beta=1e-9))
    arch = models.ARCHITECTURES["alexnet_tiny"]
    sizes = dict(image_size=64, num_classes=10)
    for exchange in ("allreduce", "ring", "butterfly", "hopping_ring"):
      t = costmodel.local_sgd_step_time(arch, m, replicas=4, batch_per_replica=16, every=4,
                                        exchange=exchange, **sizes)
      sent = costmodel.local_sgd_traffic(arch, replicas=4, exchange=exchange, **sizes)
      self.assertAlmostEqual(t["communication_s"] * 4, sent["per_sync"] * 1e-9, msg=exchange)

  def test_roofline_floors_are_each_resource_at_its_rate(self):
    floors = costmodel.roofline_floors(flops=4e12, bytes_accessed=3e9, bytes_sent=1e9,
                                       peak_flops=2e15, hbm_bytes_per_s=1e12,
                                       link_bytes_per_s=None)  # an unstated link: no floor.
    self.assertEqual(floors, {"flops / stated peak": 2e-3,
                              "bytes accessed / HBM bandwidth": 3e-3})


class CompiledTrafficTest(parameterized.TestCase):

  # The runs of step_test (scheme a) and variable_batch_test (b, c), with their configs and
  # batches: these are their compiled programs, which the suite's compilation cache holds once.
  @parameterized.named_parameters(("data", "data", 4, 1, "alexnet_tiny", "a"),
                                  ("hybrid", "hybrid", 2, 2, "alexnet_tiny", "a"),
                                  ("owt", "owt", 2, 4, "alexnet_owt_tiny", "a"),
                                  # Krizhevsky's FC passes: the same bytes as (a), in K pieces.
                                  ("owt_b", "owt", 1, 8, "alexnet_owt_tiny", "b"),
                                  ("owt_c", "owt", 2, 4, "alexnet_owt_tiny", "c"))
  def test_the_compiled_step_moves_the_analytic_minimum(self, scheme, data, model, name,
                                                        variant):
    source = step_test if variant == "a" else variable_batch_test
    config = source.CONFIG.copy_and_resolve_references()
    config.owt_variant = variant
    batch = source.GLOBAL_BATCH
    step = experiment.lower_train_step(testing.resolve(name, scheme, data, model, config, batch),
                                       num_classes=10, **testing.SCHEDULE)
    hlo = step.lowered.compile().as_text()
    stats = hlo_stats.collective_stats(hlo, data * model)
    measured = sum(s.bytes_per_device for s in stats.values())
    expected = costmodel.traffic(models.ARCHITECTURES[name], step.run.plan, global_batch=batch,
                                 image_size=testing.IMAGE_SIZE, num_classes=10).total
    # Beyond the minimum the step only moves its scalar metrics and finiteness verdict and, in
    # owt, the int32 labels and example ids gathered along with the features (under 8 bytes per
    # example).
    self.assertBetween(measured - expected, 0, 8 * batch + 64)

  @parameterized.named_parameters(("butterfly", "averaging", "butterfly"),
                                  ("asgd", "asgd", None))
  def test_the_local_sgd_meetings_send_the_analytic_bytes(self, scheme, method):
    # Every branch of the meeting as the program lists them: butterfly's two stages (one runs
    # per sync), A-SGD's push and its warm-start branch.
    config = testing.tiny_config(parallelism=scheme, mesh=dict(data=4, model=1),
                                 global_batch_size=16)
    if method:
      config.average_method = method
    step = experiment.lower_train_step(experiment.resolve(config), num_classes=10,
                                       **testing.SCHEDULE)
    hlo = step.lowered.compile().as_text()
    measured = sum(s.bytes_per_device for s in hlo_stats.collective_stats(hlo, 4).values())
    expected = costmodel.local_sgd_traffic(
        models.ARCHITECTURES["alexnet_tiny"], replicas=4,
        exchange=method or "parameter_server", image_size=testing.IMAGE_SIZE, num_classes=10)
    # Beyond them the step all-reduces its two metrics (and a ring stage a few int32s).
    self.assertBetween(measured - expected["in_program"], 0, 64)


if __name__ == "__main__":
  absltest.main()
