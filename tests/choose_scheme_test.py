"""benchmarks/choosing/choose_scheme.py: the schemes ranked for a described machine by the time
model, and one sentence for a description that cannot work."""

import importlib.util
import os
import subprocess
import sys

from absl.testing import absltest

from benchmarks.choosing import choose_scheme
from benchmarks.speed import gpu_topologies
from hybrid_parallel import models, partitioning, platforms
from hybrid_parallel.analysis import costmodel, hardware

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def described(**changes) -> choose_scheme.Described:
  """Two nodes of 8 H100s, the tiny one-column net at 64², batch 64."""
  machine = dict(gpu="h100", gpus_per_node=8, nodes=2, network_bytes_per_s=50e9,
                 model="alexnet_owt_tiny", global_batch=64, dtype="float32", image_size=64)
  return choose_scheme.Described(**{**machine, **changes})


class RankTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.rows, cls.refused = choose_scheme.rank(described(), compiled=False)

  def test_every_candidate_is_ranked_or_refused_best_first(self):
    names = [r["scheme"] for r in self.rows] + [r["scheme"] for r in self.refused]
    self.assertCountEqual(names, [c[0] for c in choose_scheme.candidates(16, 8)])
    self.assertIn("data 16×1", names)
    steps = [r["step_ms"] for r in self.rows]
    self.assertEqual(steps, sorted(steps))
    for r in self.rows:  # step_ms is rounded to 0.01 ms.
      images_per_sec = 64 / (r["step_ms"] / 1e3)
      self.assertAlmostEqual(r["images_per_sec"], images_per_sec,
                             delta=images_per_sec * 0.006 / r["step_ms"] + 1, msg=r["scheme"])

  def test_a_row_is_the_time_models_step(self):
    data = next(r for r in self.rows if r["scheme"] == "data 16×1")
    plan = partitioning.make_plan("data", 16, 1)
    arch = models.ARCHITECTURES["alexnet_owt_tiny"]
    # Across the two nodes: every gradient all-reduce runs on the network.
    self.assertEqual(data["mb_crossing_nodes"], data["mb_per_gpu"])
    self.assertAlmostEqual(
        data["mb_per_gpu"],
        costmodel.traffic(arch, plan, global_batch=64, image_size=64, num_classes=1000).total
        / 1e6, delta=0.05)

  def test_a_slow_network_puts_the_schemes_that_cross_it_least_first(self):
    rows, _ = choose_scheme.rank(described(network_bytes_per_s=1e6), compiled=False)
    least = min(r["mb_crossing_nodes"] for r in rows)
    self.assertEqual(rows[0]["mb_crossing_nodes"], least)
    self.assertGreater(rows[-1]["mb_crossing_nodes"], least)
    self.assertIn(rows[0]["scheme"], choose_scheme.why(rows))


class ResidualNetworkTest(absltest.TestCase):

  def test_a_resnet_is_ranked_by_its_own_traffic(self):
    rows, refused = choose_scheme.rank(described(model="resnet_tiny", nodes=1), compiled=False)
    names = [r["scheme"] for r in rows] + [r["scheme"] for r in refused]
    self.assertCountEqual(names, [c[0] for c in choose_scheme.candidates(8, 8)])
    arch = models.ARCHITECTURES["resnet_tiny"]
    for scheme, data, model in (("data 8×1", 8, 1), ("hybrid 4×2", 4, 2)):
      row = next(r for r in rows if r["scheme"] == scheme)
      kind = scheme.split()[0]
      traffic = costmodel.traffic(arch, partitioning.make_plan(kind, data, model),
                                  global_batch=64, image_size=64, num_classes=1000)
      self.assertAlmostEqual(row["mb_per_gpu"], traffic.total / 1e6, delta=0.05, msg=scheme)
      self.assertGreater(traffic.statistics, 0)  # batch norm's running averages move too.

  def test_the_command_takes_resnet50_and_says_what_calibrates_it(self):
    result = subprocess.run([sys.executable, "-m", "benchmarks.choosing.choose_scheme",
                             "--analytic", "--model=resnet50", "--global_batch=256"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn("| data 8×1 | 8×1 |", result.stdout)
    measured = choose_scheme.measured_model("resnet50")
    if measured != "resnet50":  # docs/gpu.json has no resnet50 step yet.
      self.assertIn(f"No one-GPU resnet50 step was measured: its FLOPs run at the share of the "
                    f"peak the H200's {measured} steps reached.", result.stdout)


class OtherGpusTest(absltest.TestCase):
  """The A100s, the L4 and the V100 beside the H100: each ranked, on its own node link and at its
  own peak."""

  def test_each_gpu_ranks_every_candidate_on_its_link_at_its_peak(self):
    data = {}
    for gpu in ("h100", "a100", "a100_40gb", "l4", "v100"):
      rows, refused = choose_scheme.rank(described(gpu=gpu, nodes=1), compiled=False)
      self.assertCountEqual([r["scheme"] for r in rows + refused],
                            [c[0] for c in choose_scheme.candidates(8, 8)], gpu)
      self.assertNotEmpty(rows, gpu)
      data[gpu] = next(r for r in rows if r["scheme"] == "data 8×1")
    # The same bytes on each; exposed the longer the slower the node's link: NVLink 4, then 3,
    # then 2, then the L4's PCIe.
    self.assertLen({r["mb_per_gpu"] for r in data.values()}, 1)
    communication = [data[g]["communication_ms"] for g in ("h100", "a100", "v100", "l4")]
    self.assertEqual(communication, sorted(communication))
    self.assertLess(communication[0], communication[-1])
    # The A100's 40 and 80 GB differ in memory only.
    self.assertEqual(data["a100"]["step_ms"], data["a100_40gb"]["step_ms"])

  def test_another_gpu_runs_at_the_h200s_measured_share_of_its_own_peak(self):
    measured = gpu_topologies.one_gpu_rows()
    node = lambda gpu: gpu_topologies.calibrated_node(  # noqa: E731
        gpu, "1x1x8", model="alexnet_owt", dtype="bfloat16", measured=measured)
    h200 = node("h200")
    for gpu in ("a100", "l4", "v100"):
      other = node(gpu)
      self.assertEqual((other.efficiency, other.step_overhead_s),
                       (h200.efficiency, h200.step_overhead_s), gpu)
      self.assertEqual(other.device, hardware.DEVICES[gpu])
      self.assertIs(other.node_link, hardware.NODE_LINKS[gpu])
    # The H100, the H200's processor, keeps the curve it had before other GPUs were described:
    # its calibration from its own peak equals the H200's (the same peak).
    self.assertEqual(node("h100").efficiency, h200.efficiency)

  def test_the_command_ranks_an_a100_and_says_its_compute_is_assumed(self):
    result = subprocess.run([sys.executable, "-m", "benchmarks.choosing.choose_scheme",
                             "--analytic", "--gpu=a100"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    lines = result.stdout.splitlines()
    self.assertIn("No NVIDIA A100 SXM 80GB step was measured: its compute is the H200's measured "
                  "share of this GPU's own peak, an assumption (read the ranking, not the times).",
                  lines[0])
    ranked = [line.split(" | ")[0].strip("| ") for line in lines if line.startswith("| ")][1:]
    refused = [line.split(": ")[1] for line in result.stderr.splitlines()
               if line.startswith("not possible: ")]
    self.assertCountEqual(ranked + refused, [c[0] for c in choose_scheme.candidates(8, 8)])
    self.assertGreater(len(ranked), 10)

  def test_every_gpu_and_link_names_its_source(self):
    for key in gpu_topologies.GPUS:
      device, link = hardware.DEVICES[key], hardware.NODE_LINKS[key]
      self.assertRegex(device.source, r"datasheet", key)
      self.assertTrue(link.source, key)
      self.assertEqual(gpu_topologies.GPUS[key].memory_bytes, int(device.memory_bytes), key)

  @absltest.skipUnless(gpu_topologies.unavailable_reason() is None, "needs JAX's CUDA plugin")
  def test_a_v100_under_the_cuda13_plugin_is_said_not_compilable(self):
    reason = gpu_topologies.unavailable_reason("v100")
    if any("cuda12" in p and importlib.util.find_spec(p) for p in platforms.CUDA_PLUGINS):
      self.assertIsNone(reason)
    else:
      self.assertEqual(reason, "JAX's CUDA 13 plugin, the one installed, does not compile for the "
                       "Tesla V100-SXM2-16GB's compute capability 7.0 (CUDA 13 starts at 7.5; "
                       "requirements-cuda12.txt's plugin does)")
    self.assertIsNone(gpu_topologies.unavailable_reason("a100"))


def row(scheme: str, images_per_sec: int) -> dict:
  return {"scheme": scheme, "images_per_sec": images_per_sec,
          "step_ms": round(1024e3 / images_per_sec, 2),
          "compute_ms": 1.0, "communication_ms": 0.0, "mb_per_gpu": 1.0,
          "mb_crossing_nodes": 0.0}


class WhyTest(absltest.TestCase):

  def test_the_best_wins_over_the_best_of_another_scheme(self):
    rows = [row("owt 2×4 (c)", 400_000), row("owt 2×4 (b)", 370_000), row("data 8×1", 300_000)]
    self.assertStartsWith(choose_scheme.why(rows), "owt 2×4 (c) wins: 2.56 ms a step against "
                          "3.41 for the best data (data 8×1)")

  def test_variants_of_the_best_scheme_within_the_models_error_are_said_to_tie(self):
    rows = [row("owt 2×4 (c)", 400_000), row("owt 2×4 (a)", 399_000),
            row("owt 1×8 (a)", 370_000), row("data 8×1", 300_000)]  # (a) 0.25%, 1×8 7.5% apart.
    self.assertStartsWith(choose_scheme.why(rows), "owt 2×4 (a) lies within 5% of owt 2×4 (c), "
                          "inside the model's error: a tie. owt 2×4 (c) wins: 2.56 ms a step")

  def test_rates_closer_than_the_models_error_are_a_tie(self):
    rows = [row("data 8×1", 400_000), row("owt 4×2 (c)", 390_000)]  # 2.5% apart.
    self.assertStartsWith(choose_scheme.why(rows), "data 8×1 and owt 4×2 (c) tie: ")


class BadMachineTest(absltest.TestCase):

  def test_one_sentence_and_exit_1(self):
    for flags, sentence in (
        (["--gpu=a800"], "error: --gpu 'a800' is not described; choose one of h100 (NVIDIA H100 "
         "SXM), h200 (NVIDIA H200), a100 (NVIDIA A100 SXM 80GB), a100_40gb (NVIDIA A100 SXM "
         "40GB), l4 (NVIDIA L4), v100 (NVIDIA V100 SXM2 16GB)."),
        (["--inter_node_gb_per_s=0"], "error: --inter_node_gb_per_s must be more than 0, got 0."),
        (["--gpus_per_node=3", "--global_batch=64", "--model=alexnet"],
         "error: no scheme fits 3 GPUs at global batch 64 (")):
      result = subprocess.run([sys.executable, "-m", "benchmarks.choosing.choose_scheme",
                               "--analytic", *flags], cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
      self.assertEqual(result.returncode, 1, result.stderr[-2000:])
      self.assertNotIn("Traceback", result.stderr)
      errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
      self.assertLen(errors, 1, result.stderr[-2000:])
      self.assertTrue(errors[0].startswith(sentence), errors[0])


if __name__ == "__main__":
  absltest.main()
