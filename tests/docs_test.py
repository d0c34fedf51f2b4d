"""The docs as a newcomer meets them: a short README linking every page, tables equal to the JSON
they were rendered from, and every benchmark runnable as `python -m benchmarks.NAME`."""

import os
import re
import subprocess
import sys
import tempfile

from absl.testing import absltest

from benchmarks import tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _runnable(name: str) -> bool:
  with open(os.path.join(ROOT, "benchmarks", name)) as f:
    return 'if __name__ == "__main__":' in f.read()


# The modules of benchmarks/ that run (the others are shared helpers).
BENCHMARKS = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "benchmarks"))
                    if f.endswith(".py") and _runnable(f))


class ReadmeTest(absltest.TestCase):

  def test_no_page_or_json_holds_a_path_of_the_machine_it_was_made_on(self):
    # Benchmarks write tracebacks into their JSON (benchmarks/accelerator.py strips them).
    docs = os.path.join(ROOT, "docs")
    for name in ["README.md"] + [os.path.join("docs", f) for f in os.listdir(docs)
                                 if f.endswith((".md", ".json", ".csv"))]:
      with open(os.path.join(ROOT, name)) as f:
        text = f.read()
      self.assertNotIn(ROOT + os.sep, text, name)
      self.assertNotRegex(text, r"/[^\s\"']*/site-packages/", name)

  def test_short_and_links_every_docs_page(self):
    with open(os.path.join(ROOT, "README.md")) as f:
      readme = f.read()
    self.assertLessEqual(len(readme.encode()), 12 * 1024)
    pages = {f for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md")}
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", readme))
    self.assertEqual(linked, pages)

  def test_every_linked_file_exists(self):
    for page in tables.pages(ROOT):
      with open(page) as f:
        text = f.read()
      for target in re.findall(r"\]\(([^)#\s]+)\)", text):
        if "://" not in target:
          self.assertTrue(os.path.exists(os.path.join(os.path.dirname(page), target)),
                          f"{os.path.relpath(page, ROOT)} links to a missing {target}")


class TablesTest(absltest.TestCase):

  def test_every_table_block_equals_its_json(self):
    self.assertEqual(tables.update_docs(ROOT, check=True), [])

  def test_every_measured_table_is_included_somewhere(self):
    included = set()
    for page in tables.pages(ROOT):
      with open(page) as f:
        included |= set(re.findall(r"<!-- table: ([\w-]+) -->", f.read()))
    self.assertContainsSubset(included, set(tables.SOURCES))
    self.assertEqual(included, {name for name in tables.SOURCES if tables.measured(name)})

  def test_the_large_batch_summary_takes_each_rules_best(self):
    cell = lambda batch, rule, top1, **kw: dict(part="sweep", model="m", global_batch=batch,
                                                 rule=rule, eval_top1=top1, steps=1, **kw)
    results = [cell(32, "none", 0.9), cell(256, "none", 0.5), cell(256, "lars", 0.2),
               cell(256, "lars", 0.7), cell(512, "none", 0.3), cell(512, "lars", 0.4),
               dict(cell(256, "none", 0.99), part="grid")]  # not the sweep's.
    self.assertEqual(tables.large_batch_summary(results).splitlines(), [
        "| model | batch 32, none | 256, none | 256, lars | 512, best rule |",
        "|---|---|---|---|---|", "| m | 90.00% | 50.00% | 70.00% | lars 40.00% |"])

  def test_a_stale_block_is_found_and_rewritten(self):
    text = "before\n<!-- table: max_pool -->\n| made up |\n<!-- end table -->\nafter\n"
    fresh = tables.refresh(text)
    self.assertNotEqual(fresh, text)
    self.assertIn(tables.render("max_pool"), fresh)
    self.assertTrue(fresh.startswith("before\n") and fresh.endswith("after\n"))
    self.assertEqual(tables.refresh(fresh), fresh)


class BenchmarksTest(absltest.TestCase):

  def test_each_runs_as_a_module_and_answers_help(self):
    # In parallel: each is a fresh interpreter importing JAX.
    runs = {name: subprocess.Popen([sys.executable, "-m", f"benchmarks.{name}", "--help"],
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True) for name in BENCHMARKS}
    for name, process in runs.items():
      output, _ = process.communicate(timeout=300)
      # absl prints the usage and exits 1 on --help.
      self.assertIn(process.returncode, (0, 1), f"{name}: {output[-2000:]}")
      self.assertNotIn("Traceback", output, name)
      self.assertIn(f"python -m benchmarks.{name}", output, name)  # its docstring's usage.
      self.assertIn("--", output.split(f"python -m benchmarks.{name}")[-1], name)  # its flags.

  def test_large_batch_refuses_bad_settings_before_training(self):
    with tempfile.TemporaryDirectory() as out:
      result = subprocess.run(
          [sys.executable, "-m", "benchmarks.large_batch", f"--out={out}", "--models=alexnet",
           "--batches=64", "--rules=lars", "--epochs=15", "--warmup_epochs=20"],
          cwd=ROOT, capture_output=True, text=True, timeout=300)
      self.assertEqual(result.returncode, 1, result.stderr[-2000:])
      self.assertEqual(result.stderr.strip(), "error: warmup_epochs 20.0 is longer than the "
                       "run's num_epochs 15.")
      self.assertEqual(os.listdir(out), [])  # nothing trained, nothing written.

  def test_large_batch_cells_are_configs_validation_accepts(self):
    # Every cell of the sweep, the --grid and --quick at the default flags (--quick's warmup once
    # outlasted its 2 epochs, and the run failed at its third cell). In a process of its own:
    # the benchmark's flags must be parsed to make its cells.
    code = ("from absl import flags\n"
            "import validation\n"
            "from benchmarks import large_batch\n"
            "flags.FLAGS(['large_batch'])\n"
            "for grid, quick in ((False, False), (True, False), (False, True)):\n"
            "  for _, model, batch, rule, settings in large_batch.cells(grid=grid, quick=quick):\n"
            "    validation.check_config(large_batch.cell_config(model, batch, rule, **settings))\n"
            "print('checked')\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertEqual(result.stdout.strip(), "checked")

  def test_nothing_patches_the_import_path(self):
    needle = "sys." + "path"  # spelled apart, so that this file does not match itself.
    for folder in ("benchmarks", "tests", "hybrid_parallel", "input_pipeline", "configs"):
      for directory, _, files in os.walk(os.path.join(ROOT, folder)):
        for name in files:
          if name.endswith(".py"):
            with open(os.path.join(directory, name)) as f:
              self.assertNotIn(needle, f.read(), os.path.join(directory, name))


if __name__ == "__main__":
  absltest.main()
