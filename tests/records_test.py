"""Every results file says when, on what, with which software and by which command it was made:
the record `benchmarks.publish` stamps on a study's JSON, and which every results file in docs/
carries."""

import datetime
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

from absl.testing import absltest

import benchmarks
from benchmarks import docs
from hybrid_parallel import accelerators

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")


def results_files() -> list[str]:
  return sorted(f for f in os.listdir(DOCS) if f.endswith(".json"))


def today() -> str:
  return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


class DocsRecordsTest(absltest.TestCase):

  def test_every_results_file_in_docs_carries_date_machine_software_and_command(self):
    # The files of 2026-11-27 but the superseded runs since left to git (gpu_direct_stem,
    # gpu_h100_host_batches, large_batch_tiny), at least.
    self.assertGreaterEqual(len(results_files()), 18)
    for name in results_files():
      with self.subTest(name):
        record, _ = benchmarks.load_results(os.path.join(DOCS, name))  # raises if one lacks
        self.assertRegex(record["date"], r"^2\d{3}-[01]\d-[0-3]\d$")
        self.assertIsInstance(record["machine"], str)
        # Every package the record names, each with a version or, where none was kept,
        # "unrecorded" said outright.
        self.assertContainsSubset({"python", *benchmarks.SOFTWARE}, record["software"])
        for package, version in record["software"].items():
          self.assertTrue(isinstance(version, str) and version, f"{name}: {package}")
        # Each command is a study of benchmarks/ (several, ";"-separated, where the file was
        # merged from several runs), as a user types it from the repository root.
        for command in record["command"].split("; "):
          program = re.fullmatch(r"python -m (benchmarks(?:\.\w+)+)( --\S+)*", command)
          self.assertTrue(program, f"{name}: {command!r}")
          module = program.group(1).replace(".", os.sep) + ".py"
          self.assertTrue(os.path.exists(os.path.join(ROOT, module)), f"{name}: {command!r}")

  def test_a_file_without_its_record_or_missing_a_field_is_refused(self):
    with tempfile.TemporaryDirectory() as directory:
      path = os.path.join(directory, "study.json")
      record = {"date": "2026-11-27", "machine": "m", "software": {"jax": "0"}, "command": "c"}
      for content, message in (
          ([{"row": 1}], r"study\.json is not a results file: it must be an object of exactly "
                         r"\"record\" and \"results\""),
          ({"row": 1}, "is not a results file"),
          ({"record": record, "results": [], "rows": []}, "is not a results file"),
          ({"record": {**record, "machine": ""}, "results": []},
           r"study\.json's record lacks machine: a record names date, machine, software, "
           r"command\.$"),
          ({"record": {"date": "2026-11-27"}, "results": []},
           "record lacks machine, software, command:")):
        with open(path, "w") as f:
          json.dump(content, f)
        with self.assertRaisesRegex(ValueError, message):
          benchmarks.load_results(path)
      with open(path, "w") as f:
        json.dump({"record": record, "results": [{"row": 1}]}, f)
      self.assertEqual(benchmarks.load_results(path), (record, [{"row": 1}]))
      self.assertEqual(benchmarks.load_if_present(path), [{"row": 1}])


class PublishTest(absltest.TestCase):

  def test_a_study_publishes_its_results_with_the_record_of_its_run(self):
    # A real study, as a user runs it: its JSON holds what it printed, under the record of the
    # date, this machine, this interpreter's packages and the command line.
    with tempfile.TemporaryDirectory() as out:
      before = today()
      argv = ["--layers=max_pool", "--batch=1", "--repeats=1", f"--out={out}"]
      result = subprocess.run([sys.executable, "-m", "benchmarks.speed.layer_choices", *argv],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
      self.assertEqual(result.returncode, 0, result.stderr[-2000:])
      record, rows = benchmarks.load_results(os.path.join(out, "max_pool.json"))
    self.assertEqual(rows, [json.loads(line) for line in result.stdout.splitlines()])
    self.assertIn(record["date"], {before, today()})  # the run may straddle midnight.
    self.assertEqual(record["machine"], benchmarks.this_machine())
    self.assertEqual(record["software"], benchmarks.installed_software())
    self.assertEqual(record["command"],
                     "python -m benchmarks.speed.layer_choices " + " ".join(argv))

  def test_what_a_record_names(self):
    with open("/proc/cpuinfo") as f:
      cpu = re.search(r"^model name\s*: (.*)$", f.read(), re.M).group(1)
    self.assertEqual(benchmarks.this_machine(), f"{cpu}, {os.cpu_count()} cores")  # CPU only
    software = benchmarks.installed_software(("absl-py", "no-such-package"))
    self.assertEqual(list(software), ["python", *benchmarks.SOFTWARE, "absl-py",
                                      "no-such-package"])
    self.assertEqual(software["no-such-package"], "not installed")
    self.assertRegex(software["absl-py"], r"^\d+\.\d+")
    self.assertEqual(software["python"], ".".join(map(str, sys.version_info[:3])))

  @absltest.skipUnless(importlib.util.find_spec("libtpu") and accelerators.only_the_cpu_can_run(),
                       "needs libtpu installed on a machine without an accelerator")
  def test_a_record_made_before_any_backend_does_not_start_libtpu(self):
    # table1 runs main.py in subprocesses and starts no backend itself: the record's device
    # query was the first, and started every backend, libtpu's too, which printed its failures
    # (and on a VM with a Google network card would wait for a TPU that is not there).
    # As a user's shell starts it: without the suite's JAX_PLATFORMS=cpu (tests/__init__.py).
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    result = subprocess.run(
        [sys.executable, "-c", "import benchmarks; print(benchmarks.this_machine())"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=True)
    self.assertRegex(result.stdout, r"cores\n$")
    self.assertNotIn("TPU", result.stderr)

  def test_a_page_says_where_its_figures_come_from_from_the_record(self):
    with tempfile.TemporaryDirectory() as directory:
      record = {"date": "2026-11-27", "machine": "AMD EPYC, 2 cores", "software": {"jax": "0"},
                "command": "python -m benchmarks.reliability.soak --kills=2"}
      with open(os.path.join(directory, "soak.json"), "w") as f:
        json.dump({"record": record, "results": {}}, f)
      text = ("before\n<!-- record: soak.json -->\nMeasured long ago.\n<!-- end record -->\n"
              "after\n")
      fresh = docs.refresh(text, directory)
    self.assertEqual(fresh, "before\n<!-- record: soak.json -->\nMeasured 2026-11-27 on AMD "
                     "EPYC, 2 cores: `python -m benchmarks.reliability.soak --kills=2` "
                     "(soak.json).\n<!-- end record -->\nafter\n")


if __name__ == "__main__":
  absltest.main()
