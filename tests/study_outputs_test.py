"""Where a study's results go (benchmarks.define_output_flags), as a user meets it in a fresh
clone: under runs/<study>/, resumed from there, never into docs/ or the README unless --publish;
and the progress of each run it trains, streamed as main.py shows it."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

from absl import flags
from absl.testing import absltest

import benchmarks
from tests.main_test import ROOT, said_in_order

# One cell of the large-batch sweep at tiny width: one epoch of digits (44 steps at batch 32).
TINY_SWEEP = ["--models=alexnet_owt_tiny", "--batches=32", "--rules=none", "--epochs=1",
              "--seeds=0"]


def git(clone: str, *args: str) -> str:
  return subprocess.run(["git", *args], cwd=clone, capture_output=True, text=True,
                        check=True).stdout


class OutputFlagsTest(absltest.TestCase):

  def parse(self, *argv):
    flag_values = flags.FlagValues()
    output = benchmarks.define_output_flags("owt_variants", flag_values=flag_values)
    flag_values(["study", *argv])
    return output

  def test_runs_study_by_default_out_where_given_docs_only_with_publish(self):
    self.assertEqual(self.parse().folder, os.path.join(ROOT, "runs", "owt_variants"))
    self.assertEqual(self.parse("--out=elsewhere").path("x.json"), "elsewhere/x.json")
    published = self.parse("--publish")
    self.assertEqual(published.path("x.json"), os.path.join(ROOT, "docs", "x.json"))
    self.assertTrue(published.publishing)

  def test_two_destinations_or_docs_without_publish_are_refused_while_parsing(self):
    with self.assertRaisesRegex(flags.IllegalFlagValueError,
                                r"--out=elsewhere and --publish both say where the results go: "
                                r"--publish writes docs/; give one of them\.$"):
      self.parse("--out=elsewhere", "--publish")
    for inside_docs in (os.path.join(ROOT, "docs"), os.path.join(ROOT, "docs", "mine")):
      with self.assertRaisesRegex(flags.IllegalFlagValueError,
                                  r"is inside docs/, the project's published results: pass "
                                  r"--publish \(and no --out\) to write there"):
        self.parse(f"--out={inside_docs}")


class FreshCloneTest(absltest.TestCase):
  """A study run in a fresh clone of this checkout (its uncommitted changes committed there: the
  code as it stands is what runs)."""

  def setUp(self):
    super().setUp()
    folder = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, folder, ignore_errors=True)
    self.clone = os.path.join(folder, "clone")
    subprocess.run(["git", "clone", "-q", ROOT, self.clone], check=True)
    changes = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    if changes:
      subprocess.run(["git", "apply"], cwd=self.clone, input=changes, check=True)
      git(self.clone, "-c", "user.name=test", "-c", "user.email=test@localhost", "commit",
          "-qam", "this checkout's uncommitted changes")
    self.assertEqual(git(self.clone, "status", "--porcelain"), "")

  def study(self, module: str, *argv: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", module, *argv], cwd=self.clone,
                            capture_output=True, text=True, timeout=600)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    return result

  def test_a_study_writes_under_runs_streams_progress_and_resumes_from_there(self):
    first = self.study("benchmarks.papers.large_batch", *TINY_SWEEP)
    # Its one run's progress, as main.py shows it, each line once.
    said_in_order(self, first.stderr,
                  re.escape("cell 1/1: alexnet_owt_tiny, batch 32, none, seed 0 …"),
                  re.escape("compiling the step for the 1×1 mesh (single) …"),
                  r"compiled in \d+\.\d s; the first step ran in \d+\.\d\d s\.",
                  r"step 44/44 \| loss [\d.]+ \| .* \| ETA \d+m\d\ds", "cell 1/1 done")
    self.assertEqual(git(self.clone, "status", "--porcelain"), "")  # docs/, README untouched.
    _, (row,) = benchmarks.load_results(
        os.path.join(self.clone, "runs", "large_batch", "large_batch.json"))
    self.assertEqual((row["model"], row["global_batch"], row["rule"], row["seeds"]),
                     ("alexnet_owt_tiny", 32, "none", [0]))
    # Again: the seed is in runs/large_batch/ (docs/ has no such cell), so nothing trains.
    again = self.study("benchmarks.papers.large_batch", *TINY_SWEEP)
    self.assertNotIn("compiling the step", again.stderr)
    self.assertEqual(git(self.clone, "status", "--porcelain"), "")

  def test_publish_writes_docs(self):
    published = os.path.join(self.clone, "docs", "scaling_model.json")
    os.remove(published)
    result = self.study("benchmarks.choosing.scaling_model", "--publish")
    record, results = benchmarks.load_results(published)
    self.assertIn("yadan_table1", results)
    self.assertEqual(record["command"], "python -m benchmarks.choosing.scaling_model --publish")
    self.assertIn("wrote docs/scaling_model.json; refreshed its tables in", result.stderr)
    self.assertFalse(os.path.exists(os.path.join(self.clone, "runs", "scaling_model")))


if __name__ == "__main__":
  absltest.main()
