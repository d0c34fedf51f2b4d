"""benchmarks/speed/accelerator.py's dry run on the CPU: every section runs and reports, so that the
one command meant for a fresh GPU machine does not rot between GPUs."""

import importlib.metadata
import os
import subprocess
import sys
import tempfile

import jax
from absl.testing import absltest

import benchmarks
from tests import testing


def installed_version(name: str) -> str | None:
  try:
    return importlib.metadata.version(name)
  except importlib.metadata.PackageNotFoundError:
    return None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The notebook runs the notebook, which notebook_test runs already (the trainer runs main.py too,
# but what it reads of the run — the median window, the traced steps — only here); the dry suite
# is tests/conventions_test.py alone.
SECTIONS = ("environment", "single_device", "pytorch", "profile", "tuning", "mock_multi_gpu",
            "trainer", "suite")
TIMEOUT_S = 600  # the dry run takes 20-30 s on a 2-core machine.


class DryRunTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.out = tempfile.mkdtemp()
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.speed.accelerator", "--dry_run", f"--out={cls.out}",
         f"--sections={','.join(SECTIONS)}",
         # Every section runs however slow the machine: the timeout alone limits the run.
         f"--budget_s={TIMEOUT_S}"], cwd=ROOT, capture_output=True, text=True,
        timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    cls.record, cls.report = benchmarks.load_results(os.path.join(cls.out, "accelerator.json"))

  def section(self, name):
    section = self.report["sections"][name]
    self.assertNotIn("error", section, section.get("error"))
    self.assertNotIn("skipped", section)  # the time budget (below) never skips one here.
    return section.get("result")

  def test_every_section_ran_without_error(self):
    self.assertEqual(list(self.report["sections"]), list(SECTIONS))
    for name in SECTIONS:
      self.section(name)

  def test_its_record_names_this_run_and_the_runs_merged_into_it(self):
    self.assertEqual(
        (self.record["machine"], self.record["software"]),
        (benchmarks.this_machine(), benchmarks.installed_software(("torch",))))
    first = self.record["command"]
    self.assertEqual(first, f"python -m benchmarks.speed.accelerator --dry_run --out={self.out} "
                            f"--sections={','.join(SECTIONS)} --budget_s={TIMEOUT_S}")
    # A second call merged with the first (--previous): its record names both commands, and
    # the machine once.
    with tempfile.TemporaryDirectory() as out:
      argv = ["--dry_run", f"--out={out}", "--sections=environment",
              f"--previous={os.path.join(self.out, 'accelerator.json')}"]
      result = subprocess.run([sys.executable, "-m", "benchmarks.speed.accelerator", *argv],
                              cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
      self.assertEqual(result.returncode, 0, result.stderr[-3000:])
      record, report = benchmarks.load_results(os.path.join(out, "accelerator.json"))
    self.assertEqual(record["command"],
                     f"{first}; python -m benchmarks.speed.accelerator {' '.join(argv)}")
    self.assertEqual(record["machine"], self.record["machine"])
    self.assertEqual(list(report["sections"]), list(SECTIONS))  # the first call's, kept.

  def test_the_machines_packages_are_recorded(self):
    # A GPU machine runs the suite under its own packages, not the pins: its failures are read
    # against these.
    packages = self.section("environment")["packages"]
    # simplejpeg: the ImageNet extra's (requirements-imagenet.txt), which the JPEG rows need;
    # recorded as None where the extra is not installed.
    self.assertEqual((packages["jax"], packages["flax"], packages["pytest"],
                      packages["simplejpeg"]),
                     tuple(installed_version(name)
                           for name in ("jax", "flax", "pytest", "simplejpeg")))

  def test_the_step_is_measured(self):
    (row,) = self.section("single_device")
    self.assertEqual((row["model"], row["dtype"], row["batch"]),
                     ("alexnet_owt_tiny", "bfloat16", 8))
    self.assertGreater(row["program_gib"], 0)
    self.assertBetween(row["mfu"], 0.0, 1.0)
    # Each figure is rounded (the row's `rounding`), so each stands for an interval; the
    # relations between them hold exactly before rounding, so their intervals must meet —
    # whatever the machine's speed (an absolute tolerance on a ratio of rounded MFUs failed
    # on a faster CPU: issue 60).
    figure = lambda name, suffix: testing.rounded(row[name + suffix],
                                                  **row["rounding"][name])
    for suffix in ("", "_pipelined"):  # each step waited for, and dispatched back to back.
      images_per_step = testing.Interval(8e3, 8e3)  # images per step, in images·ms/s.
      self.assertTrue(figure("images_per_sec", suffix).overlaps(
          images_per_step / figure("step_ms", suffix)), row)
    # MFU in proportion to images/s (the same FLOPs and peak for both).
    self.assertTrue((figure("mfu", "_pipelined") / figure("mfu", "")).overlaps(
        figure("images_per_sec", "_pipelined") / figure("images_per_sec", "")), row)

  def test_profile_and_tuning(self):
    profile = self.section("profile")
    ops = profile["top_ops"]
    self.assertNotEmpty(ops)
    # Each share rounded to 4 places (trace_stats.top_ops): at most that over 1 each.
    self.assertLessEqual(sum(op["share"] for op in ops), 1.0 + 5e-5 * len(ops) + 1e-12)
    self.assertLen(profile["timeline"]["longest_gaps_ms"], profile["steps"] - 1)
    self.assertBetween(profile["timeline"]["busy_share"], 0.0, 1.0)
    tuning = self.section("tuning")
    self.assertEqual(tuning[0]["vs_baseline"], 1.0)
    # The dry run's one variant changes a config field, the compiler options and the PRNG.
    self.assertEqual([r["variant"] for r in tuning[1:]],
                     ["max_pool reduce_window + LLVM optimisation level 1 + dropout bits from "
                      "unsafe_rbg (not threefry)"])
    self.assertEqual(tuning[0]["variant"], "baseline (max_pool argmax, stem_conv direct)")

  def test_multi_device_programs_run_in_their_own_processes(self):
    (row,) = self.section("mock_multi_gpu")
    self.assertEqual((row["scheme"], row["mesh"], row["devices"]), ("hybrid", [2, 2], 4))
    self.assertGreater(row["bytes_per_device"], 0)
    self.assertEqual(row["async_all_reduces"], 0)  # XLA:CPU's collectives are synchronous.
    # The time model's prediction beside it, calibrated on the H200's one-GPU steps.
    self.assertGreaterEqual(row["model_step_ms"], row["model_compute_ms"])
    self.assertGreater(row["model_compute_ms"], 0)
    self.assertEqual(row["model_calibrated_from"], "H200 alexnet bfloat16: batches 128 and 512")

  def test_the_trainer_is_set_against_the_step_with_its_traced_steps(self):
    (row,) = self.section("trainer")
    self.assertEqual((row["model"], row["batch"], row["steps"]), ("alexnet_owt_tiny", 16, 6))
    # Quotients of the report's figures, rounded to 3 places: within that rounding of them.
    for ratio, step in (("trainer_vs_step", "step_images_per_sec"),
                        ("trainer_vs_pipelined_step", "step_images_per_sec_pipelined")):
      quotient = row["trainer_images_per_sec"] / row[step]
      self.assertTrue(testing.rounded(row[ratio], decimals=3).overlaps(
          testing.Interval(quotient, quotient)), (ratio, row))
    traced = row["traced"]
    self.assertEqual((traced["steps"], len(traced["longest_gaps_ms"])), (2, 1))
    self.assertBetween(traced["busy_share"], 0.0, 1.0)
    self.assertTrue(os.path.exists(os.path.join(self.out, "trainer_16.trace.json.gz")))

  def test_pytorch_is_compared_or_its_absence_said(self):
    result = self.section("pytorch")
    try:
      import torch  # noqa: F401
    except ImportError:
      self.assertIn("PyTorch is not installed", result["skipped"])
    else:
      self.assertNotEmpty(result["comparison"])

  def test_the_suite_is_counted_from_pytests_own_summary(self):
    import jax
    import unittest
    from tests import conventions_test
    result = self.section("suite")
    tests = unittest.defaultTestLoader.loadTestsFromModule(conventions_test).countTestCases()
    self.assertEqual((result["suite_passed"], result["suite_failed"], result["suite_skipped"]),
                     (tests, 0, 0))
    self.assertEqual((result["suite_jax"], result["returncode"]), (jax.__version__, 0))

  def test_the_cards_memory_and_clock_are_read_from_nvidia_smi(self):
    from benchmarks.speed import accelerator_tables  # no flags: importable here.
    # What the H100 printed (docs/gpu_h100.json), read as the target-config check reads it.
    card = accelerator_tables.nvidia_smi_card(
        "name, driver_version, memory.total [MiB], clocks.current.sm [MHz], clocks.max.sm [MHz], "
        "power.limit [W]\nNVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB, 1980 MHz, 1980 MHz, "
        "700.00 W\n")
    self.assertEqual((card["memory.total [MiB]"], card["clocks.max.sm [MHz]"]),
                     ("81559 MiB", "1980 MHz"))
    self.assertEqual(accelerator_tables.nvidia_smi_card(None), {})

  def test_tracebacks_lose_the_machines_paths(self):
    import benchmarks  # the package's toolkit defines no flags.
    report = {"error": f'File "{ROOT}/train.py", line 3\n  File "/usr/lib/python3/site-packages/'
                       f'jax/api.py", line 9', "rows": [{"seconds": 1.0}]}
    self.assertEqual(benchmarks.without_machine_paths(report),
                     {"error": 'File "train.py", line 3\n  File "site-packages/jax/api.py",'
                               ' line 9', "rows": [{"seconds": 1.0}]})

  def test_the_report_renders_every_section(self):
    with open(os.path.join(self.out, "accelerator.md")) as f:
      report = f.read()
    for name in SECTIONS:
      self.assertIn(f"## {name} (", report)
    self.assertIn("| alexnet_owt_tiny | bfloat16 | 8 |", report)


class MeasureGpuScriptTest(absltest.TestCase):
  """benchmarks/speed/measure_gpu.sh's feeding part, dry: the decoded set made, main.py fed by
  each path and set against the step and against synthetic data, its JSON complete; without the
  imagenet extra, the JPEG rows skipped, saying so."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.jpeg_path = not testing.PREPARED_MISSING  # the imagenet extra's readers and writer
    cls.out = tempfile.mkdtemp()
    cls.script = subprocess.run(
        ["bash", "benchmarks/speed/measure_gpu.sh", cls.out, "3000", "--dry_run",
         "--parts=feeding"], cwd=ROOT, capture_output=True, text=True, timeout=2 * TIMEOUT_S,
        env={**os.environ, "PYTHON": sys.executable})  # the script runs this python
    report = os.path.join(cls.out, "feeding", "input_pipeline.json")
    if not os.path.exists(report):
      with open(os.path.join(cls.out, "measure_gpu.log")) as f:
        raise AssertionError(f.read()[-3000:])
    cls.record, cls.report = benchmarks.load_results(report)

  def test_the_script_names_what_it_runs_and_says_nothing_of_how_it_is_lent(self):
    self.assertEqual(self.script.returncode, 0, self.script.stderr[-2000:])
    with open(os.path.join(ROOT, "benchmarks", "speed", "measure_gpu.sh")) as f:
      self.assertNotIn("lent", f.read())
    with open(os.path.join(self.out, "measure_gpu.log")) as f:
      log = f.read()
    self.assertIn("feeding: decoded set", log)
    self.assertNotIn("== environment, trainer", log)  # only the part asked for ran
    bad = subprocess.run(["bash", "benchmarks/speed/measure_gpu.sh", self.out, "--parts=feed"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    self.assertEqual((bad.returncode, bad.stderr.strip()),
                     (1, "error: unknown part 'feed'; choose from trainer, input_pipeline, "
                         "feeding, suite."))

  def test_every_path_is_set_against_the_step_and_synthetic_data(self):
    rows = {row["source"]: row for row in self.report["feeding"]}
    self.assertEqual(set(rows), {"synthetic", "decoded yuv420 on the devices",
                                 "decoded yuv420 from host memory",
                                 "prepared jpeg q90, a worker process per core"})
    synthetic = rows["synthetic"]["trainer_images_per_sec"]
    if not self.jpeg_path:
      jpeg = rows.pop("prepared jpeg q90, a worker process per core")
      self.assertEqual(jpeg["skipped"], "the JPEG path's readers are not installed")
      with open(os.path.join(self.out, "measure_gpu.log")) as f:
        self.assertIn("the imagenet extra (grain, array-record, simplejpeg) is not installed: "
                      "skipping the JPEG rows", f.read())
    for name, row in rows.items():
      self.assertNotIn("error", row, row.get("error"))
      self.assertEqual((row["batch"], row["model"]), (16, "alexnet_owt_tiny"))
      rate = row["trainer_images_per_sec"]
      # Quotients of the row's figures, rounded to 3 places: within that rounding of them.
      pairs = [("trainer_vs_pipelined_step", row["step_images_per_sec_pipelined"])]
      if name != "synthetic":
        pairs.append(("trainer_vs_synthetic", synthetic))
      if name.startswith("prepared"):
        pairs.append(("trainer_vs_jpeg_ceiling", row["jpeg_ceiling_images_per_sec"]))
      for ratio, denominator in pairs:
        self.assertTrue(testing.rounded(row[ratio], decimals=3).overlaps(
            testing.Interval(rate / denominator, rate / denominator)), (ratio, row))
      self.assertBetween(row["traced"]["busy_share"], 0.0, 1.0)
    self.assertEqual(rows["decoded yuv420 on the devices"]["resident_images"], 64)
    # The set's rows gathered on the device as the step gathers them equal the file's (on a GPU
    # past 2³¹ bytes into its 150,000 rows; the dry run's 64 rows stop short of that).
    far = self.report["far_rows"]
    self.assertEqual((far["rows"], far["equal_to_the_file"], far["past_2_31_bytes"]),
                     (64, True, False))
    self.assertIn(63, far["rows_gathered"])
    if not self.jpeg_path:
      return
    # The ceiling is every core at one core's measured decode rate.
    (one_core,) = [p for p in self.report["pipelines"] if p["source"] == "prepared jpeg q90"]
    self.assertAlmostEqual(rows["prepared jpeg q90, a worker process per core"]
                           ["jpeg_ceiling_images_per_sec"],
                           one_core["images_per_sec_median"] * os.cpu_count(), delta=0.05)

  def test_the_decoded_formats_bytes_and_rates_are_recorded(self):
    prepared = {row["colour"]: row for row in self.report["decoded_prepare"]}
    self.assertEqual({c: prepared[c]["bytes_per_image"] for c in prepared},
                     {"yuv420": 256 * 256 * 3 // 2, "rgb": 256 * 256 * 3})
    self.assertEqual(prepared["yuv420"]["imagenet_train_gb"], 125.9)  # 1,281,167 × 98,304 B
    self.assertGreater(prepared["yuv420"]["psnr_vs_rgb_db"], 30)
    for colour in ("yuv420", "rgb"):  # the preparation's rate with 1 and 2 workers
      self.assertEqual(sorted(prepared[colour]["images_per_sec_by_workers"]), ["1", "2"])
    placements = [(row["source"], row["placement"]) for row in self.report["decoded"]]
    self.assertEqual(placements, [(f"decoded {c}", p) for c in ("yuv420", "rgb")
                                  for p in ("devices", "host", "host")]
                     + [("host→device transfers", "transfer")])
    # The gather + augment program alone, against the bare step it goes in front of: the ratio
    # of the unrounded finish time, rounded to 3 places, against the finish rounded to 3 places
    # (a step of over 1 ms: ≤ 5e-4 apart) — within 1e-3.
    for row in self.report["decoded"]:
      if row["placement"] == "devices":
        self.assertAlmostEqual(row["finish_over_bare_step"],
                               row["finish_ms"] / row["bare_step_ms_pipelined"], delta=1e-3)


if __name__ == "__main__":
  absltest.main()
