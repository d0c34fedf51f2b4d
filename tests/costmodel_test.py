"""The cost model: AlexNet arithmetic, α-β formulas, traffic equal to the compiled step's."""

import dataclasses
import math

from absl.testing import absltest, parameterized

import experiment

from hybrid_parallel import models, partitioning
from hybrid_parallel.analysis import costmodel, hardware, hlo_stats
from tests import models_test, step_test, testing, variable_batch_test

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

  def test_alexnet_bn_counts_its_norms_where_the_biases_were(self):
    # Batch norm's scale and shift replace each conv's bias: the module's own count.
    layers = costmodel.layers(models.ARCHITECTURES["alexnet_bn"], 224, 1000)
    self.assertEqual(sum(layer.params for layer in layers),
                     models.count_params(models_test.abstract_params("alexnet_bn", 1000)))
    self.assertEqual([layer.norm_channels for layer in layers if layer.kind == "conv"],
                     [c.features for c in models.ARCHITECTURES["alexnet_bn"].convs])

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
    # Two devices behind one uplink share its bandwidth where their copies go through the host;
    # peer to peer under one switch, they do not cross it.
    shared = machine(LINK, devices_per_uplink=2, host_staged=True)
    self.assertAlmostEqual(costmodel.transfer_time(gradients, shared) -
                           costmodel.transfer_time(gradients, staged),
                           2 * 2 * n * (p - 1) / p * LINK.beta)
    self.assertAlmostEqual(costmodel.transfer_time(gradients, machine(LINK, devices_per_uplink=2)),
                           ring)
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


class PaperSourcesTest(absltest.TestCase):
  """The papers' machines hold the values their sources publish (analysis/hardware.py)."""

  def test_cuda_convnet_is_mathieu_et_al_figure_3(self):
    # Mathieu, Henaff & LeCun 2014, Figure 3 bottom panel: CudaConv on a GTX Titan, seconds per
    # call of forward / ∂input / ∂filters at batch 32, 64, 128.
    self.assertEqual(hardware.MATHIEU2014_CUDACONV_TITAN_S,
                     {32: (0.1157, 0.1310, 0.1123), 64: (0.1282, 0.1627, 0.2074),
                      128: (0.2116, 0.2616, 0.4040)})
    self.assertIs(hardware.paper_machines()["yadan2013"].conv_kernels, hardware.CUDA_CONVNET)
    rates = hardware.CUDA_CONVNET.rate_by_batch
    # Per image against 128 over the three passes: 0.88 at 64, 0.61 at 32 (to the two digits
    # the derivation states).
    self.assertEqual({b: round(r, 2) for b, r in rates.items()}, {32: 0.61, 64: 0.88, 128: 1.0})
    # Per pass, as REFERENCES reads them: forward 0.83 / 0.46, ∂input 0.80 / 0.50, ∂filters
    # 0.97 / 0.90 (at 64 / 32).
    per_pass = [hardware.relative_rates({b: t[i] for b, t in
                                         hardware.MATHIEU2014_CUDACONV_TITAN_S.items()})
                for i in range(3)]
    self.assertEqual([(round(r[64], 2), round(r[32], 2)) for r in per_pass],
                     [(0.83, 0.46), (0.80, 0.50), (0.97, 0.90)])
    # The layer (7×7 kernels, 32×32 input, 96 → 256 planes, 26×26 outputs) at 128 runs at 15.8%
    # of the TITAN's peak over its three passes: cuda-convnet's share, as Yadan et al.'s 13.6%.
    flops = 2 * 3 * 128 * 26 * 26 * 256 * 96 * 7 * 7
    share = flops / sum(hardware.MATHIEU2014_CUDACONV_TITAN_S[128]) / hardware.TITAN.peak_flops[
        "float32"]
    self.assertAlmostEqual(share, 0.158, places=3)

  def test_cuda_convnet2_is_chetlur_et_al_figure_2(self):
    # Chetlur et al. 2014, Figure 2: cuda-convnet2 on a K40, TFLOP/s at batch 32, 64, 128.
    self.assertEqual(hardware.CHETLUR2014_CUDACONVNET2_K40_TFLOPS, {32: 0.51, 64: 0.75, 128: 1.57})
    self.assertIs(hardware.paper_machines()["krizhevsky2014"].conv_kernels,
                  hardware.CUDA_CONVNET2)
    self.assertEqual({b: round(r, 3) for b, r in hardware.CUDA_CONVNET2.rate_by_batch.items()},
                     {32: 0.325, 64: 0.478, 128: 1.0})

  def test_the_kernels_are_chosen_by_what_divides_the_batch(self):
    # filter_acts.cu: 4 images a thread for multiples of 128, 2 for multiples of 64, else 1.
    kernels = hardware.CUDA_CONVNET
    for batch, measured in ((256, 128), (1024, 128), (128, 128), (192, 64), (64, 64), (96, 32),
                            (32, 32), (16, 32)):
      self.assertEqual(kernels.rate(batch), kernels.rate_by_batch[measured], msg=batch)

  def test_krizhevsky_2014_machine_is_section_5(self):
    m = hardware.paper_machines()["krizhevsky2014"]
    # "at the full PCI-Express 2.0 rate (about 6GB/sec) through a PCI-Express switch"
    self.assertEqual(m.node_link.beta, 1 / 6e9)
    self.assertIn("PCIe 2.0", m.node_link.name)
    self.assertIn("about 6GB/sec", m.node_link.source)
    # Two halves of four under two CPUs; "two PCI-Express 2.0 lanes for four GPUs": two GPUs on
    # each link to the host; between the halves, "through the host memory".
    self.assertEqual((m.devices, m.devices_per_socket, m.devices_per_uplink), (8, 4, 2))
    self.assertTrue(m.cross_socket_staged)
    self.assertFalse(m.host_staged)  # within a half, peer to peer through the switch.
    for quoted in ("two PCI-Express 2.0 lanes for four GPUs", "through the host memory and "
                   "incurs a latency penalty"):
      self.assertIn(quoted, m.layout_source)
    self.assertEqual(m.device, hardware.K20)


class PaperMachinesTest(absltest.TestCase):
  """The papers' machines price what their descriptions say."""
  M = hardware.paper_machines()["krizhevsky2014"]

  def test_a_transfer_between_the_halves_costs_twice_the_latency_and_half_the_bandwidth(self):
    # Staged through host memory: two copies one after the other (twice the latency), through an
    # uplink two GPUs share (half the bandwidth); within a half, the switch's full rate.
    link = self.M.node_link
    across = hardware.Link("across", alpha=2 * link.alpha, beta=2 * link.beta)
    for kind, n in (("allreduce", 244e6), ("gather", 38e6), ("allreduce", 4.0)):
      within = costmodel.Transfer("gradients", kind, n, 4)
      between = costmodel.Transfer("gradients", kind, n, 8)
      price = (costmodel.allreduce_time if kind == "allreduce" else
               lambda _, n, p, link: costmodel.gather_scatter_time(n, p, link))
      self.assertAlmostEqual(costmodel.transfer_time(within, self.M),
                             price("ring", n, 4, link=link), msg=kind)
      self.assertAlmostEqual(costmodel.transfer_time(between, self.M),
                             price("ring", n, 8, link=across), msg=kind)
      # Per byte and per message alike, the halves' link is twice as dear.
      self.assertAlmostEqual(costmodel.transfer_time(between, self.M),
                             2 * price("ring", n, 8, link=link), msg=kind)
    self.assertAlmostEqual(costmodel.transfer_time(
        costmodel.Transfer("x", "sent", 1e6, 8), self.M), 2 * (link.alpha + 1e6 * link.beta))

  def test_b_sends_a_pass_s_rows_within_the_half_then_across(self):
    link, n = self.M.node_link, 4.7e6
    one = lambda a, b: a + n * b
    # 8 workers: 3 copies under the sender's CPU, 4 to the other half (twice the latency, half
    # the bandwidth); 4 workers: all 3 within the half.
    self.assertAlmostEqual(costmodel.pass_copy_time(n, 8, self.M, variant="b"),
                           3 * one(link.alpha, link.beta) + 4 * one(2 * link.alpha, 2 * link.beta))
    self.assertAlmostEqual(costmodel.pass_copy_time(n, 4, self.M, variant="b"),
                           3 * one(link.alpha, link.beta))
    # (c)'s all-gather runs at the slowest link its group crosses.
    across = hardware.Link("across", alpha=2 * link.alpha, beta=2 * link.beta)
    self.assertAlmostEqual(costmodel.pass_copy_time(n, 8, self.M, variant="c"),
                           costmodel.gather_scatter_time(n, 8, across) / 2)

  def test_a_device_computes_its_convolutions_at_its_batch_s_rate(self):
    # Data parallelism over 4 at 256 images: 64 per device, the convolutions at 0.88 of 128's
    # rate, the FC layers (no published curve) at the calibrated one.
    arch = models.ARCHITECTURES["alexnet"]
    titans = hardware.paper_machines()["yadan2013"]
    plan = partitioning.make_plan("data", 4, 1)
    flops = costmodel.flops_by_kind(arch, plan, global_batch=256, image_size=224,
                                    num_classes=1000)
    rate = titans.device.peak_flops["float32"] * titans.efficiency
    t = costmodel.compute_time(arch, plan, titans, global_batch=256, image_size=224,
                               num_classes=1000)
    self.assertAlmostEqual(t, (flops["conv"] / hardware.CUDA_CONVNET.rate_by_batch[64] +
                               flops["fc"]) / rate)
    # At 128 images a device (data over 2), the rate the machine was calibrated at.
    plan = partitioning.make_plan("data", 2, 1)
    self.assertAlmostEqual(
        costmodel.compute_time(arch, plan, titans, global_batch=256, image_size=224,
                               num_classes=1000),
        costmodel.compute_flops_per_device(arch, plan, global_batch=256, image_size=224,
                                           num_classes=1000) / rate)

  def test_a_machine_calibrated_off_128_images_predicts_its_own_time(self):
    arch = models.ARCHITECTURES["alexnet"]
    single = partitioning.make_plan("single", 1, 1)
    flops = costmodel.flops_by_kind(arch, single, global_batch=64, image_size=224,
                                    num_classes=1000)
    m = hardware.paper_machines()["yadan2013"].calibrated(
        flops_per_step=sum(flops.values()), conv_flops_per_step=flops["conv"], batch=64,
        seconds_per_step=0.5, dtype="float32", source="test")
    t = costmodel.step_time(arch, single, m, global_batch=64, image_size=224, num_classes=1000)
    self.assertAlmostEqual(t["step_s"], 0.5)
    # At 128 the convolutions run 1 / 0.88 as fast per image.
    at_128 = costmodel.step_time(arch, single, m, global_batch=128, image_size=224,
                                 num_classes=1000)
    conv_s = flops["conv"] / (m.device.peak_flops["float32"] * m.efficiency)
    self.assertAlmostEqual(at_128["step_s"], 2 * (0.5 - conv_s / 0.8801926550270921 + conv_s))

  def test_a_modern_machine_has_no_batch_curve_beyond_its_measured_overhead(self):
    for name in ("h100", "h200"):
      self.assertIsNone(hardware.gpu_node(name).conv_kernels)
      self.assertEqual(hardware.gpu_node(name).conv_rate(64), 1.0)


class FrameworksOf2017Test(absltest.TestCase):
  """MXNet's kvstore 'device', Goyal et al.'s three-phase sum, and backprop-order overlap."""
  P2 = hardware.p2_8xlarge()

  def test_kvstore_device_loads_the_links_as_its_copies_do(self):
    # Every key's sum on one GPU, keys spread evenly; every other GPU copies its gradient there
    # and the sum back. Count, by brute force, the bytes each link carries per direction for p
    # GPUs whose first four share one x16 link (and pairs one board switch).
    bandwidth_only = hardware.Link("1 B/s", alpha=0.0, beta=1.0)
    m = dataclasses.replace(self.P2, node_link=bandwidth_only)
    for p in (2, 4, 8):
      n = float(p)  # one key of n/p bytes rooted on each GPU: n bytes in all.
      up = {}  # (group size, group index) → bytes leaving the group; GPU links as groups of 1.
      for root in range(p):
        for gpu in range(p):
          if gpu == root:
            continue
          for k in (1,) + m.switch_groups:
            if k < p and gpu // k != root // k:  # in to the root, then the sum back out.
              up[k, gpu // k] = up.get((k, gpu // k), 0) + n / p
              up[k, root // k] = up.get((k, root // k), 0) + n / p
      self.assertAlmostEqual(costmodel.kvstore_device_time(n, p, m), max(up.values()), msg=p)
    # Eight GPUs: the link between the two groups of four carries 4n against a GPU's 1.75n.
    self.assertAlmostEqual(costmodel.kvstore_device_time(1.0, 8, m), 4.0)
    # Two GPUs of one board move a key at MXNet's measured rate: 258 MB in 23.2 ms.
    pcie = dataclasses.replace(self.P2.node_link, alpha=0.0, gamma=0.0)
    self.assertAlmostEqual(costmodel.kvstore_device_time(
        258e6, 2, dataclasses.replace(self.P2, node_link=pcie)), 23.2e-3)

  def test_a_derived_latency_gives_the_published_speedup(self):
    link = hardware.ETHERNET_50G
    buffers = [4e5 * (i + 1) for i in range(50)]
    alpha = costmodel.latency_from_speedup(3.0, p=32, buffer_bytes=buffers, link=link)
    timed = lambda algorithm: sum(costmodel.allreduce_time(
        algorithm, n, 32, link=dataclasses.replace(link, alpha=alpha)) for n in buffers)
    self.assertAlmostEqual(timed("ring") / timed("butterfly"), 3.0)
    with self.assertRaisesRegex(ValueError, "latency alone"):
      costmodel.latency_from_speedup(11.0, p=32, buffer_bytes=buffers, link=link)

  def test_exchanges_start_as_backprop_produces_them(self):
    # Forward order; backprop runs the last layer first: its 3 s exchange starts at 1 s, the
    # others wait for it: the queue ends at 5 s, backprop at 3 s.
    self.assertAlmostEqual(costmodel.backprop_exposed([1, 1, 1], [0.5, 0.5, 3]), 2.0)
    # Short exchanges hide behind the layers still to compute; the first layer's cannot.
    self.assertAlmostEqual(costmodel.backprop_exposed([1, 1, 1], [0.25, 0.5, 0.5]), 0.25)
    self.assertAlmostEqual(costmodel.backprop_exposed([1, 1, 1], [0, 0, 0]), 0.0)

  def test_the_backprop_schedule_hides_what_exchanging_after_backprop_pays(self):
    arch, sizes = models.ARCHITECTURES["alexnet"], dict(image_size=224, num_classes=1000)
    plan = partitioning.make_plan("data", 8, 1)
    m = self.P2.calibrated(flops_per_step=1e12, seconds_per_step=1.0, dtype="float32",
                           source="test")
    after, during = (costmodel.step_time(arch, plan, m, global_batch=2048, **sizes,
                                         algorithm="kvstore_device", schedule=schedule)
                     for schedule in ("program", "backprop"))
    self.assertAlmostEqual(after["compute_s"], during["compute_s"])
    self.assertLess(during["communication_s"], after["communication_s"])
    # Backprop is two thirds of the compute; exchanging after it pays every layer's exchange.
    backward = costmodel.backward_time_by_layer(arch, plan, m, global_batch=2048, **sizes)
    self.assertAlmostEqual(sum(backward), 2 / 3 * after["compute_s"])
    exchanges = [costmodel.transfer_time(t, m, algorithm="kvstore_device")
                 for t in costmodel.analytic_transfers(arch, plan, global_batch=2048, **sizes)]
    self.assertAlmostEqual(after["communication_s"], sum(exchanges))
    self.assertAlmostEqual(during["communication_s"],
                           costmodel.backprop_exposed(backward, exchanges))
    with self.assertRaisesRegex(ValueError, "one gradient sum per layer"):
      costmodel.step_time(arch, plan, m, global_batch=2048, **sizes, schedule="backprop",
                          transfers=[costmodel.Transfer("program", "sent", 1e8, 8)])

  def test_servers_sum_within_then_across_then_back(self):
    m = hardware.big_basin(32, network_alpha=1e-5)
    n = 1e8
    across = costmodel.Transfer("gradients", "allreduce", n, 256, crosses_nodes=True)
    self.assertAlmostEqual(
        costmodel.transfer_time(across, m, algorithm="butterfly"),
        costmodel.allreduce_time("ring", n, 8, link=hardware.NVLINK1) +
        costmodel.allreduce_time("butterfly", n, 32, link=m.network))
    # One card per GPU instead: the 256 GPUs' sum on the network alone.
    per_gpu = dataclasses.replace(m, network_per_node=False)
    self.assertAlmostEqual(costmodel.transfer_time(across, per_gpu, algorithm="butterfly"),
                           costmodel.allreduce_time("butterfly", n, 256, link=m.network))


class Sources2017Test(absltest.TestCase):
  """The 2016–2017 machines hold what their sources publish."""

  def test_a_k80_gpu_is_half_a_board(self):
    # NVIDIA's datasheet: 8.73 TFLOP/s a board with boost, two GK210s of 12 GB each.
    self.assertAlmostEqual(hardware.K80_GK210.peak_flops["float32"], 4.365e12)
    self.assertEqual(hardware.K80_GK210.memory_bytes, 12e9)
    self.assertIn("8.73 TFLOP/s", hardware.K80_GK210.source)
    self.assertEqual(hardware.P100_SXM2.peak_flops["float32"], 10.6e12)

  def test_p2_8xlarge_is_four_boards_behind_two_links(self):
    m = hardware.p2_8xlarge()
    self.assertEqual((m.devices, m.device, m.switch_groups), (8, hardware.K80_GK210, (2, 4)))
    # MXNet's kvstore between two GPUs: 258 MB in 23.2 ms (tools/bandwidth README).
    self.assertAlmostEqual(1 / m.node_link.beta / 1e9, 11.12, places=2)
    for quoted in ("GPU Peer to Peer", "it saturates the single 16x link between GPU 0,1,2,3 and "
                   "GPU 4,5,6,7", "inferred"):
      self.assertIn(quoted, m.layout_source)

  def test_big_basin_is_goyal_et_al_section_4(self):
    m = hardware.big_basin(32, network_alpha=0.0)
    self.assertEqual((m.devices_per_node, m.nodes, m.device), (8, 32, hardware.P100_SXM2))
    self.assertTrue(m.network_per_node)
    self.assertAlmostEqual(1 / m.network.beta, 6.25e9)  # 50 Gbit/s.
    self.assertAlmostEqual(1 / m.node_link.beta, 20e9)  # one NVLink 1.0, per direction.
    self.assertIsNone(hardware.big_basin(1, network_alpha=0.0).network)


class CompiledTrafficTest(parameterized.TestCase):

  # The runs of step_test (scheme a) and variable_batch_test (b, c), with their configs and
  # batches: these are their compiled programs, which the suite's compilation cache holds once.
  @parameterized.named_parameters(("data", "data", 4, 1, "alexnet_tiny", "a"),
                                  ("hybrid", "hybrid", 2, 2, "alexnet_tiny", "a"),
                                  ("owt", "owt", 2, 4, "alexnet_owt_tiny", "a"),
                                  # Krizhevsky's FC passes: the same bytes as (a), in K pieces.
                                  ("owt_b", "owt", 1, 8, "alexnet_owt_tiny", "b"),
                                  ("owt_c", "owt", 2, 4, "alexnet_owt_tiny", "c"),
                                  # A residual network: every conv's input gathered but the
                                  # stem's and a shortcut's; partial logits summed.
                                  ("resnet_data", "data", 4, 1, "resnet_tiny", "a"),
                                  ("resnet_hybrid", "hybrid", 2, 2, "resnet_tiny", "a"),
                                  ("resnet_cifar_model", "model", 1, 2, "resnet_cifar_tiny", "a"),
                                  ("resnet_owt", "owt", 2, 4, "resnet_cifar_tiny", "a"),
                                  # Batch norm's running statistics, averaged over "data".
                                  ("bn_hybrid", "hybrid", 2, 2, "alexnet_bn_tiny", "a"))
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
    arch = models.ARCHITECTURES[name]
    expected = costmodel.traffic(arch, step.run.plan, global_batch=batch,
                                 image_size=testing.IMAGE_SIZE, num_classes=10).total
    # Beyond the minimum the step only moves its scalar metrics and finiteness verdict and, in
    # owt, the int32 labels and example ids gathered along with the features (under 8 bytes per
    # example). Below it by one thing: in a post-activation block with a projection, the two batch
    # norms' shifts have one gradient (the block output's, summed), which XLA sends once.
    once = 0.0
    if isinstance(arch, models.ResNetArchitecture) and not arch.preactivation:
      plan = step.run.plan
      p = math.prod({"data": plan.data, "model": plan.model}[a] for a in plan.conv_batch_axes)
      once = 2 * (p - 1) / p * 4 * sum(
          conv.features for conv in arch.conv_layers(testing.IMAGE_SIZE)
          if conv.name.endswith("shortcut")) / plan.layout.conv_shards
    self.assertBetween(measured - expected, -once, 8 * batch + 64)

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
