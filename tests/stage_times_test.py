"""`pytest --stage-times` (tests/stage_times.py) on a sample of tests whose seconds are known:
one compiles a program, one reads it back from the persistent cache, one starts a process, one
sleeps. Run as pytest runs the suite, in a worker process of pytest-xdist, so that the numbers
travel as the suite's do, with a compilation cache of its own (empty at the start)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

from absl.testing import absltest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SAMPLE = '''
import os
import subprocess
import sys
import time

import jax
import numpy as np

ARANGE = np.arange(3.0)  # made by NumPy: the tests' only program is theirs


def test_a_function_of_the_module():  # a second scope
  pass


class TestSample:

  def test_compiles(self):
    jax.jit(lambda x: x * 3.0 + 1.0)(ARANGE).block_until_ready()

  def test_reads_the_cache(self):
    jax.clear_caches()  # not in memory: read from the persistent cache.
    jax.jit(lambda x: x * 3.0 + 1.0)(ARANGE).block_until_ready()

  def test_starts_a_process(self):
    subprocess.run([sys.executable, "-c", "import time\\n"
                    "while time.process_time() < 0.5: pass"], check=True)

  def test_sleeps(self):
    time.sleep(0.3)
'''


class StageTimesTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    folder = tempfile.mkdtemp()
    cls.addClassCleanup(shutil.rmtree, folder, ignore_errors=True)
    with open(os.path.join(folder, "conftest.py"), "w") as f:
      f.write("from tests.conftest import *  # noqa: F401,F403  (the suite's hooks)\n")
    with open(os.path.join(folder, "sample_test.py"), "w") as f:
      f.write(textwrap.dedent(SAMPLE))
    rows = os.path.join(folder, "rows.jsonl")
    cls.pytest = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1",
         "--stage-times", f"--stage-times-json={rows}", "sample_test.py"],
        cwd=folder, capture_output=True, text=True, timeout=600,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
             "PYTHONPATH": ROOT, "JAX_COMPILATION_CACHE_DIR": os.path.join(folder, "cache"),
             "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"})  # every program cached
    cls.rows, cls.calls = [], {}
    if os.path.exists(rows):
      with open(rows) as f:
        cls.rows = [json.loads(line) for line in f]
      cls.calls = {row["test"].rsplit("::", 1)[1]: row for row in cls.rows
                   if row["phase"] == "call"}

  def test_the_table_sums_each_scope_and_every_phase_of_its_tests(self):
    self.assertEqual(self.pytest.returncode, 0,
                     self.pytest.stdout[-3000:] + self.pytest.stderr[-3000:])
    # The section's table rows (other sections, such as the path matrix's, follow it).
    section = self.pytest.stdout.split("stage times: where the seconds went", 1)[1]
    section = section.split("\n=", 1)[0]
    table = {line.split("|")[1].strip(): [float(x) for x in line.split("|")[2:-1]]
             for line in section.splitlines()
             if line.startswith("| ") and not line.startswith("| scope |")}
    columns = ("wall", "cpu", "children_cpu", "making_programs", "trace", "lower", "compile",
               "cache_read")
    tests = [row for row in self.rows if row["test"]]
    self.assertLen(tests, 3 * 5)  # setup, call and teardown of each test
    scopes = {"all tests": lambda test: True,
              "sample_test.py::TestSample": lambda test: "::TestSample::" in test,
              "sample_test.py": lambda test: "::TestSample::" not in test}
    for name, member in scopes.items():
      sums = [sum(row[c] for row in tests if member(row["test"])) for c in columns]
      # The table's figures are the sums rounded to 0.1 s.
      for column, printed, summed in zip(columns, table[name], sums):
        self.assertAlmostEqual(printed, summed, delta=0.05 + 1e-9, msg=(name, column))
    # Before the first test: the worker's collection, which imported the module.
    (between,) = [row for row in self.rows if row["phase"] == "between tests"]
    self.assertGreater(between["wall"], 0.0)
    self.assertAlmostEqual(table["between tests"][0], between["wall"], delta=0.05 + 1e-9)

  def test_a_compile_is_traced_lowered_and_compiled_within_the_test(self):
    row = self.calls["test_compiles"]
    for stage in ("trace", "lower", "compile"):
      self.assertGreater(row[stage], 0.0, stage)
    # The union of the stages: at least the longest, at most their sum (1 µs: float rounding)
    # and the test's own time (1 ms: JAX's spans and the wall time are read from two clocks).
    self.assertBetween(row["making_programs"], max(row["trace"], row["lower"], row["compile"]),
                       row["trace"] + row["lower"] + row["compile"] + 1e-6)
    self.assertLessEqual(row["making_programs"], row["wall"] + 1e-3)
    self.assertEqual((row["cache_read"], row["children_cpu"]), (0.0, 0.0))

  def test_a_program_read_back_is_a_cache_read(self):
    row = self.calls["test_reads_the_cache"]
    self.assertGreater(row["cache_read"], 0.0)
    self.assertLessEqual(row["cache_read"], row["compile"])

  def test_a_started_process_is_its_starters_children_cpu(self):
    # The child spins until 0.5 s of its own CPU, plus its interpreter's start.
    self.assertGreaterEqual(self.calls["test_starts_a_process"]["children_cpu"], 0.5)
    self.assertEqual(self.calls["test_starts_a_process"]["making_programs"], 0.0)
    for name in ("test_compiles", "test_reads_the_cache", "test_sleeps",
                 "test_a_function_of_the_module"):
      self.assertEqual(self.calls[name]["children_cpu"], 0.0, name)

  def test_a_sleep_is_wall_time_alone(self):
    row = self.calls["test_sleeps"]
    self.assertGreaterEqual(row["wall"], 0.3)
    self.assertLess(row["cpu"], 0.1)  # a sleep uses next to none
    self.assertEqual((row["making_programs"], row["children_cpu"]), (0.0, 0.0))


if __name__ == "__main__":
  absltest.main()
