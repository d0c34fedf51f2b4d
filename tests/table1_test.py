"""benchmarks/papers/table1.py and what docs/configs.md makes of it: a row for every config in
configs/ (a config added without a run of the study is a missing row), every published row from
one run on one machine, ImageNet's rows with their published accuracy, and each config's
docstring held to its row."""

import functools
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile

from absl.testing import absltest

import benchmarks
import configs
from benchmarks import docs, figures
from benchmarks.papers import tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE1 = os.path.join(ROOT, "docs", "table1.json")


def study(*argv: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "benchmarks.papers.table1", *argv], cwd=ROOT,
                        capture_output=True, text=True, timeout=900)


def docstring_figures(name: str) -> tuple[float | None, float | None]:
  """The test top-1 (a fraction) and the minutes on a 2-core CPU that configs/NAME.py's docstring
  says to expect ("Expected: about 96% test top-1", "Cost: about 3.5 minutes on a 2-core CPU")."""
  doc = " ".join(importlib.import_module(f"configs.{name}").__doc__.split())
  top1 = re.search(r"Expected: about (\d+(?:\.\d+)?)% test top-1", doc)
  minutes = re.search(r"Cost: about (\d+(?:\.\d+)?) minutes? on a 2-core CPU", doc)
  return (float(top1.group(1)) / 100 if top1 else None,
          float(minutes.group(1)) if minutes else None)


# What the tests ask the study itself, in one process of its own: importing the study defines its
# flags, which a study imported beside it here (--out) defined already. First the configs its own
# rule (table1.is_trained_here) does not train; then, with configs.not_run_here made to decline
# owt8, whether it trains owt8 and the row it makes of it.
_ASK_THE_STUDY = """
import configs, json
from benchmarks.papers import table1, tables
not_trained = [n for n in configs.names() if not table1.is_trained_here(n)]
configs.not_run_here = lambda name: 'a step takes minutes on a CPU' if name == 'owt8' else None
row = table1.not_run_row('owt8')
print(json.dumps({"not_trained": not_trained, "owt8_declined": [
    table1.is_trained_here('owt8'), row['not_run'], row['published'],
    tables.expected_results(({'machine': 'm', 'date': 'd'}, [row])).splitlines()[2]]}))
"""


@functools.cache
def answers() -> dict:
  result = subprocess.run([sys.executable, "-c", _ASK_THE_STUDY], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


class PublishedTableTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.record, cls.rows = benchmarks.load_results(TABLE1)
    cls.by_config = {r["config"]: r for r in cls.rows}

  def test_every_config_has_a_row_and_configs_md_shows_it(self):
    # A config added to configs/ fails here until `python -m benchmarks.papers.table1 --publish`
    # has run again.
    self.assertEqual(sorted(self.by_config), configs.names())
    with open(os.path.join(ROOT, "docs", "configs.md")) as f:
      page = f.read()
    block = re.search(r"<!-- table: expected_results -->\n(.*?)<!-- end table -->", page, re.S)
    shown = re.findall(r"^\| \[`(\w+)`\]\(\.\./configs/\1\.py\) \|", block.group(1), re.M)
    self.assertEqual(sorted(shown), configs.names())
    for name in configs.names():  # a result, or not run here with the published one.
      row = re.search(rf"^\| \[`{name}`\].*$", block.group(1), re.M).group(0)
      self.assertRegex(row, r"\| \d+\.\d\d% \|" if name not in self.not_run() else
                       r"\| not run here \|.*\| (\d+\.\d\d% published \(|— \()")

  def not_run(self) -> set[str]:
    return {r["config"] for r in self.rows if "not_run" in r}

  def test_the_rows_come_from_one_full_run(self):
    # --publish, and --shared_machine where other work ran beside it, in either order.
    program, *flags = self.record["command"].split()[2:]
    self.assertEqual(program, "benchmarks.papers.table1")
    self.assertIn(sorted(flags), (["--publish"], ["--publish", "--shared_machine"]))
    # Every config this study can train was trained; the others carry their published result.
    for name, row in self.by_config.items():
      published = configs.published_result(name)
      if published or configs.not_run_here(name):
        self.assertEqual(row["published"], published, name)
        self.assertEqual(row["not_run"] == configs.not_run_here(name),
                         bool(configs.not_run_here(name)), name)
        self.assertNotIn("eval_top1", row, name)
      else:
        self.assertEqual(row["overrides"], [], name)  # trained as configs/NAME.py is, whole.
        self.assertIn("eval_top1", row, name)

  def test_each_docstring_expects_what_its_row_measured(self):
    for name, row in self.by_config.items():
      if "not_run" in row:
        doc = " ".join(importlib.import_module(f"configs.{name}").__doc__.split())
        if row["published"]:
          self.assertIn(tables.percent(row["published"]["top1"]), doc, name)
        self.assertRegex(doc, r"[Nn]ot run here", name)
        continue
      top1, minutes = docstring_figures(name)
      self.assertIsNotNone(top1, f"{name}: no 'Expected: about N% test top-1'")
      self.assertIsNotNone(minutes, f"{name}: no 'Cost: about N minutes on a 2-core CPU'")
      # Rounded to the point and one seed's: seeds spread by about a point and digits' test set
      # samples ±1 point near 96%, so two points apart is a docstring to correct.
      self.assertLessEqual(abs(top1 - row["eval_top1"]), 0.02, name)
      # A wall time from a machine shared with other work says nothing of the cost; on a quiet
      # one, a docstring within a factor of two of it is right enough to plan with.
      if "shared with other work" not in self.record["machine"]:
        self.assertLessEqual(max(minutes * 60 / row["wall_clock_s"],
                                 row["wall_clock_s"] / (minutes * 60)), 2.0, name)


class StudyTest(absltest.TestCase):

  def test_publish_is_refused_before_any_work_for_a_subset_or_a_short_run(self):
    with open(TABLE1, "rb") as f:
      before = f.read()
    for argv in (["--configs=single"], ["--num_train_steps=2"]):
      result = study("--publish", *argv)
      self.assertEqual(result.returncode, 1, result.stderr[-2000:])
      self.assertEqual(result.stderr.strip().splitlines()[-1],
                       "error: --publish writes the table of every config, measured in one run "
                       "on one machine: leave out --configs and --num_train_steps (or write this "
                       "subset with --out=DIR).")
    with open(TABLE1, "rb") as f:
      self.assertEqual(f.read(), before)

  def test_a_quick_run_trains_what_it_can_and_gives_imagenet_its_published_result(self):
    with tempfile.TemporaryDirectory() as out:
      result = study("--configs=large_batch,imagenet_owt8", "--num_train_steps=2",
                     f"--out={out}", f"--workdirs={out}/runs")
      self.assertEqual(result.returncode, 0, result.stderr[-3000:])
      record, rows = benchmarks.load_results(os.path.join(out, "table1.json"))
    trained, imagenet = rows
    self.assertEqual((trained["config"], trained["steps"], trained["scheme"]),
                     ("large_batch", 2, "single"))
    self.assertEqual(trained["trains"], "alexnet_bn_tiny, digits at 64², batch 256, 30 epochs "
                     "(stopped at 2 steps)")
    self.assertEqual(imagenet["published"], configs.published_result("imagenet_owt8"))
    self.assertEqual((imagenet["scheme"], imagenet["mesh"]), ("owt (b)", "1×8"))
    self.assertRegex(record["machine"], r", \d+ cores, each mesh on simulated CPU devices$")
    rendered = tables.expected_results((record, rows)).splitlines()
    self.assertEqual(rendered[3], "| [`imagenet_owt8`](../configs/imagenet_owt8.py) | owt (b) | "
                     "1×8 | alexnet_owt, ImageNet at 224², batch 1024, 90 epochs | not run here | "
                     "— | 57.14% published (Krizhevsky 2014, Table 1, (1024, 128) on 8 K20s: "
                     "42.86% error) | — |")
    self.assertIn(f"| {benchmarks.machine_in_words(record['machine'])} | ", rendered[2])

  def test_a_config_whose_data_is_not_here_must_declare_its_published_result(self):
    # Every config of configs/ whose data this study cannot fetch declares one (else the study
    # stops before any training, naming the config); one it declines to train says why.
    # The study's own rule (table1.is_trained_here), asked in a process of its own (answers()).
    not_trained = answers()["not_trained"]
    self.assertContainsSubset({"imagenet_single", "imagenet_owt8", "resnet50_cifar"}, not_trained)
    for name in not_trained:
      published, why = configs.published_result(name), configs.not_run_here(name)
      self.assertTrue(published or why, name)
      if published:
        self.assertEqual(set(published), {"dataset", "top1", "source"}, name)

  def test_a_config_a_cpu_cannot_train_is_a_row_that_says_why(self):
    self.assertEqual(answers()["owt8_declined"], [
        False, "a step takes minutes on a CPU", None,
        "| [`owt8`](../configs/owt8.py) | owt (a) | 2×4 | alexnet_owt, digits at 64², batch 1024, "
        "250 epochs | not run here | — | — (a step takes minutes on a CPU) | — |"])


class FiguresTest(absltest.TestCase):

  def test_the_machine_reads_in_a_sentence(self):
    self.assertEqual(figures._machine_in_a_sentence({"machine": "AMD EPYC, 2 cores"}),
                     "a 2-core AMD EPYC")
    sentence = benchmarks.machine_in_words
    self.assertEqual(sentence("AMD EPYC, 2 cores, each mesh on simulated CPU devices"),
                     "a 2-core AMD EPYC")
    self.assertEqual(sentence("AMD EPYC, 2 cores, each mesh on simulated CPU devices, shared "
                              "with other work (wall times disturbed)"),
                     "a 2-core AMD EPYC shared with other work")
    gpu = "1 × NVIDIA H100 80GB HBM3; host Intel(R) Xeon(R) Processor, 16 cores"
    self.assertEqual(sentence(gpu), gpu)

  def test_durations_read_as_a_reader_plans(self):
    self.assertEqual([tables.duration(s) for s in (49.6, 209.0, 2193.0, 7200.0)],
                     ["50 s", "3.5 min", "36.5 min", "2.0 h"])

  def test_the_expected_results_table_is_rendered_with_its_record(self):
    self.assertTrue(getattr(docs.SOURCES["expected_results"][0], "with_record", False))


if __name__ == "__main__":
  absltest.main()
