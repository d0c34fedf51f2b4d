"""The docs as a newcomer meets them: a short README linking every page, tables equal to the JSON
they were rendered from, and every benchmark runnable as `python -m benchmarks.GROUP.NAME` and
named in benchmarks/README.md's map."""

import ast
import json
import os
import re
import subprocess
import sys
import tempfile

from absl import flags
from absl.testing import absltest

import benchmarks
from benchmarks import docs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def benchmark_modules() -> dict[str, str]:
  """Every module of benchmarks/ (dotted below it: "speed.throughput") → its source."""
  modules = {}
  for directory, _, files in os.walk(os.path.join(ROOT, "benchmarks")):
    for name in files:
      if name.endswith(".py") and name != "__init__.py":
        path = os.path.join(directory, name)
        dotted = os.path.relpath(path, os.path.join(ROOT, "benchmarks"))[:-3].replace(os.sep, ".")
        with open(path) as f:
          modules[dotted] = f.read()
  return modules


# The modules of benchmarks/ that run (the others are shared helpers and tables).
BENCHMARKS = sorted(name for name, source in benchmark_modules().items()
                    if 'if __name__ == "__main__":' in source)


# Placeholders the docs write in commands, and what stands in for them when a command is checked.
PLACEHOLDERS = {"N": "2", "I": "0"}


def commands_in(text: str):
  """(program, argv) of each `python -m benchmarks.X ...`, `python -m input_pipeline.prepare ...`
  and `python main.py ...` in a page.

  Commands are read from code blocks (a trailing backslash continues a line; `#` starts a
  comment) and from inline code spans (which may wrap). One naming a placeholder program or
  config (NAME) stands for many and is left out; N and I take the values in PLACEHOLDERS."""
  blocks = re.findall(r"```[^\n]*\n(.*?)```", text, re.S)
  lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
  outside_blocks = re.sub(r"```.*?```", "", text, flags=re.S)
  lines += [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", outside_blocks)]
  for line in lines:
    line = line.split(" #")[0]
    for found in re.finditer(r"python (?:-m (benchmarks(?:\.\w+)+|input_pipeline\.prepare)|"
                             r"(main\.py))((?:\s+--\S+)*)", line):
      program, argv = found.group(1) or found.group(2), found.group(3).split()
      if "NAME" in program or any("NAME" in arg for arg in argv):
        continue
      yield program, [re.sub(r"=([A-Z])$", lambda m: "=" + PLACEHOLDERS[m.group(1)], arg)
                      for arg in argv]


def documented_commands():
  """(page, program, argv) for every command in README.md and docs/*.md."""
  for page in docs.pages(ROOT):
    with open(page) as f:
      for program, argv in commands_in(f.read()):
        yield os.path.relpath(page, ROOT), program, argv


def python_output(test: absltest.TestCase, code: str, *args: str) -> str:
  """What `python -c code args` printed, in a process of its own (a study defines absl flags,
  which one process can hold once), after asserting that it succeeded."""
  result = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
  test.assertEqual(result.returncode, 0, result.stderr[-2000:])
  return result.stdout


# Run as `python -c _PARSE_DOCUMENTED NAME ARGVS_JSON`: parses each argv with benchmarks.NAME's
# flags, then prints the usage `python -m benchmarks.NAME --help` would print.
_PARSE_DOCUMENTED = """
import importlib, json, sys
from absl import flags
name, argvs = sys.argv[1], json.loads(sys.argv[2])
module = importlib.import_module("benchmarks." + name)
for argv in argvs:
  flags.FLAGS.unparse_flags()
  flags.FLAGS([name, *argv])
print(f"accepted {len(argvs)} documented commands")
print("usage:", module.__doc__, flags.FLAGS.module_help(module.__name__))
"""


class ReadmeTest(absltest.TestCase):

  def test_no_page_or_json_holds_a_path_of_the_machine_it_was_made_on(self):
    # Benchmarks write tracebacks into their JSON (benchmarks/speed/accelerator.py strips them).
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
    for page in docs.pages(ROOT):
      with open(page) as f:
        text = f.read()
      for target in re.findall(r"\]\(([^)#\s]+)\)", text):
        if "://" not in target:
          self.assertTrue(os.path.exists(os.path.join(os.path.dirname(page), target)),
                          f"{os.path.relpath(page, ROOT)} links to a missing {target}")


class TablesTest(absltest.TestCase):

  def test_every_table_block_equals_its_json(self):
    self.assertEqual(docs.update_docs(ROOT, check=True), [])

  def test_every_measured_table_is_included_somewhere(self):
    included = set()
    for page in docs.pages(ROOT):
      with open(page) as f:
        included |= set(re.findall(r"<!-- table: ([\w-]+) -->", f.read()))
    self.assertContainsSubset(included, set(docs.SOURCES))
    self.assertEqual(included, {name for name in docs.SOURCES if docs.measured(name)})

  def test_the_large_batch_summary_takes_each_rules_best_over_three_seeds(self):
    def setting(batch, rule, top1s, part="sweep"):
      row = dict(part=part, model="m", global_batch=batch, rule=rule, steps=1)
      for seed, top1 in enumerate(top1s):  # None: the seed diverged, at step 7.
        benchmarks.add_seed(row, seed, {"eval_top1": top1,
                                        "diverged_at_step": None if top1 else 7})
      return row
    results = [setting(32, "none", [0.9] * 3), setting(256, "none", [0.5, 0.6, 0.4]),
               setting(256, "lars", [0.2] * 3), setting(256, "lars", [0.7, 0.8, 0.6]),
               setting(256, "lars", [0.99]),  # one seed: not the summary's.
               setting(512, "none", [None] * 3), setting(512, "lars", [0.4, 0.4, None]),
               setting(256, "none", [0.99] * 3, part="grid")]  # not the sweep's.
    summary, _ = docs.SOURCES["large_batch_summary"]
    # mean ± sd over the seeds that finished [± √(p(1−p)/360), digits' test set].
    self.assertEqual(summary(results).splitlines(), [
        "| model | batch 32, none | 256, none | 256, lars | 512, best rule |",
        "|---|---|---|---|---|",
        "| m | 90.0 ± 0.0 [± 1.6] | 50.0 ± 10.0 [± 2.6] | 70.0 ± 10.0 [± 2.4] "
        "| lars 40.0 ± 0.0 [± 2.6] (1 of 3 seeds NaN) |"])
    sweep, _ = docs.SOURCES["large_batch"]  # every setting, the one-seed best included.
    self.assertEqual(sweep(results).splitlines()[3:], [
        "| m | 256 | 1 | 50.0 ± 10.0 [± 2.6] | 99.0 [± 0.5], 1 seed |",
        "| m | 512 | 1 | NaN on all 3 seeds (step 7, 7, 7) | 40.0 ± 0.0 [± 2.6] (1 of 3 seeds "
        "NaN) |"])

  def test_a_stale_block_is_found_and_rewritten(self):
    text = "before\n<!-- table: max_pool -->\n| made up |\n<!-- end table -->\nafter\n"
    fresh = docs.refresh(text)
    self.assertNotEqual(fresh, text)
    self.assertIn(docs.render("max_pool"), fresh)
    self.assertTrue(fresh.startswith("before\n") and fresh.endswith("after\n"))
    self.assertEqual(docs.refresh(fresh), fresh)


class BenchmarksTest(absltest.TestCase):

  def test_each_documents_its_usage_and_accepts_the_commands_the_docs_give(self):
    # One fresh interpreter per benchmark (each imports JAX and defines its own flags), all at
    # once. A command is accepted when absl parses it: unknown flags, bad values and each
    # benchmark's validators (e.g. "--config or --all") fail there, before any work.
    documented = {name: [] for name in BENCHMARKS}
    for page, program, argv in documented_commands():
      if program.startswith("benchmarks."):
        documented[program.split(".", 1)[1]].append(argv)
    runs = {name: subprocess.Popen([sys.executable, "-c", _PARSE_DOCUMENTED, name,
                                    json.dumps(argvs)], cwd=ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
            for name, argvs in documented.items()}
    for name, process in runs.items():
      output, _ = process.communicate(timeout=300)
      self.assertEqual(process.returncode, 0, f"{name}: {output[-2000:]}")
      self.assertIn(f"accepted {len(documented[name])} documented commands", output, name)
      usage = output.split("usage:", 1)[-1]
      self.assertIn(f"python -m benchmarks.{name}", usage, name)  # its docstring's usage,
      self.assertIn("--", usage.split(f"python -m benchmarks.{name}", 1)[-1], name)  # its flags.

  def test_the_map_names_every_module_and_no_module_is_a_hub(self):
    with open(os.path.join(ROOT, "benchmarks", "README.md")) as f:
      readme = f.read()
    modules = benchmark_modules()
    for name in modules:
      group, _, module = name.rpartition(".")
      named = re.search(rf"`{module}\.py`" if not group else
                        rf"`{group}/`[^\n]*(\n  [^\n]*)*`{module}\.py`", readme)
      self.assertTrue(named, f"benchmarks/README.md's map does not name {name}")
    # Who imports each module of benchmarks/ (the package's own namespace, what every study
    # shares, aside): at most five others, so that no change to one ripples through all.
    importers = {name: set() for name in modules}
    for directory, _, files in os.walk(ROOT):
      if os.sep + "." in directory:  # virtual environments, .git
        continue
      for file in (f for f in files if f.endswith(".py")):
        path = os.path.join(directory, file)
        with open(path) as f:
          tree = ast.parse(f.read())
        for node in ast.walk(tree):
          names = ([f"{node.module}.{a.name}" for a in node.names] + [node.module]
                   if isinstance(node, ast.ImportFrom) and node.module else
                   [a.name for a in node.names] if isinstance(node, ast.Import) else [])
          for imported in names:
            if imported.startswith("benchmarks.") and imported[11:] in importers:
              importers[imported[11:]].add(path)
    hubs = {name: len(paths) for name, paths in importers.items() if len(paths) > 5}
    self.assertEqual(hubs, {})

  def test_a_list_of_choices_refuses_an_unknown_item_or_none_while_parsing(self):
    def parse(*argv, default=None):
      flag_values = flags.FlagValues()
      chosen = benchmarks.define_choices("parts", ("cause", "paine"), "Parts.", default=default,
                                         flag_values=flag_values)
      flag_values(["study", *argv])
      self.assertEqual(flag_values["parts"].help, "Parts. Of: cause, paine.")
      return chosen.value
    self.assertEqual(parse(), ["cause", "paine"])
    self.assertEqual(parse(default=("paine",)), ["paine"])
    self.assertEqual(parse("--parts=paine,cause"), ["paine", "cause"])
    for bad in ("--parts=paine,su", "--parts="):
      with self.assertRaisesRegex(flags.IllegalFlagValueError,
                                  r"--parts: choose one or more of cause, paine\.$"):
        parse(bad)
    # A study refuses it as one line before any work: nothing written.
    with tempfile.TemporaryDirectory() as out:
      result = subprocess.run(
          [sys.executable, "-m", "benchmarks.papers.asynchronous", f"--out={out}",
           "--parts=paine1,su,nope"], cwd=ROOT, capture_output=True, text=True, timeout=300)
      self.assertEqual(result.returncode, 1, result.stderr[-2000:])
      self.assertIn("--parts: choose one or more of reference, synchronous, momentum, staleness, "
                    "summing, paine1, paine2, paine3, speeds, speeds_paine1, su, validate, "
                    "overlap.", result.stderr)
      self.assertEqual(os.listdir(out), [])
      # A part that reads an earlier part's choice, with neither its runs nor that part.
      result = subprocess.run(
          [sys.executable, "-m", "benchmarks.papers.asynchronous", f"--out={out}",
           "--parts=paine1,reference"], cwd=ROOT, capture_output=True, text=True, timeout=300)
      self.assertEqual(result.returncode, 1, result.stderr[-2000:])
      self.assertEqual(result.stderr.strip().splitlines()[-1],
                       "error: --parts=paine1 needs the reference part's runs (its one client "
                       "rate), which are not in --out: run --parts=reference first, or before it "
                       "in --parts.")
      self.assertEqual(os.listdir(out), [])

  def test_asynchronous_keeps_every_seed_it_has_and_drops_settings_no_longer_made(self):
    # Seeds 2, 0, 1 of a setting already there and --seeds=1 asked: all three kept, in seed
    # order, none trained (a trained row would lack "kept"); a setting its part no longer makes
    # is dropped.
    code = (
        "import dataclasses, json\n"
        "from benchmarks.papers import asynchronous as a\n"
        "setting = a.synchronous_settings()[0]\n"
        "row = lambda seed: {**dataclasses.asdict(setting), 'seed': seed, 'kept': True}\n"
        "gone = {**row(3), 'label': 'a setting no longer made'}\n"
        "rows = a.run_settings([setting], seeds=[1], all_machines=a.machines(),\n"
        "                      done=[row(2), row(0), gone, row(1)])\n"
        "print(json.dumps([[r['seed'], r.get('kept'), r['label']] for r in rows]))\n")
    label = "data 8×1, rate 0.025"
    self.assertEqual(json.loads(python_output(self, code).splitlines()[-1]),
                     [[0, True, label], [1, True, label], [2, True, label]])

  def test_asynchronous_reprices_the_runs_it_keeps(self):
    # Two kept runs carrying each other's prices (as after a change to the time model): each
    # leaves with its own setting's price and, the A-SGD run, with the staleness its clients saw
    # (replayed from its seed: 8 clients at n_sync 1, every push simultaneous, none stale);
    # nothing else of either changes.
    code = (
        "import dataclasses, json\n"
        "from benchmarks.papers import asynchronous as a\n"
        "machines = a.machines()\n"
        "settings = [a.synchronous_settings()[0], a.momentum_settings()[0]]\n"
        "prices = [a.predicted_step_s(s, machines) for s in settings]\n"
        "runs = [{**dataclasses.asdict(s), 'seed': 4, 'final_eval_top1': 0.5,\n"
        "         'predicted_step_s': price} for s, price in zip(settings, prices[::-1])]\n"
        "print(json.dumps({'prices': prices, 'runs': runs,\n"
        "                  'repriced': a.repriced(runs, machines)}))\n")
    out = json.loads(python_output(self, code).splitlines()[-1])
    self.assertNotEqual(out["prices"][0], out["prices"][1])  # else the swap proves nothing.
    self.assertEqual([r["predicted_step_s"] for r in out["repriced"]], out["prices"])
    self.assertNotIn("staleness", out["repriced"][0])  # data parallelism has no server.
    seen = out["repriced"][1].pop("staleness")
    self.assertEqual((seen["pushes"], seen["staleness_max"], seen["client_steps"]),
                     (8 * 450, 0, [450] * 8))
    self.assertEqual([{**r, "predicted_step_s": None} for r in out["repriced"]],
                     [{**r, "predicted_step_s": None} for r in out["runs"]])

  def test_every_main_command_in_the_docs_describes_a_run(self):
    # --dry_run checks every flag and config field and resolves the run, touching nothing.
    commands = [argv for _, program, argv in documented_commands() if program == "main.py"]
    self.assertGreaterEqual(len(commands), 3)  # the README's and docs/faults.md's two.
    runs = [subprocess.Popen([sys.executable, "main.py", *argv, "--dry_run"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for argv in commands]
    for argv, process in zip(commands, runs):
      output, errors = process.communicate(timeout=300)
      self.assertEqual(process.returncode, 0, f"{argv}: {errors[-2000:]}")
      self.assertIn('"mesh"', output, argv)

  def test_every_prepare_command_in_the_docs_parses(self):
    # With flags: a command (a bare `python -m input_pipeline.prepare` names the program).
    commands = [argv for _, program, argv in documented_commands()
                if program == "input_pipeline.prepare" and argv]
    self.assertGreaterEqual(len(commands), 3)  # docs/input_pipeline.md's two, the README's.
    code = ("import json, sys\nfrom absl import flags\nfrom input_pipeline import prepare\n"
            "prepare.define_flags()\nfor argv in json.loads(sys.argv[1]):\n"
            "  flags.FLAGS.unparse_flags()\n  flags.FLAGS(['prepare', *argv])\n"
            "print('accepted', len(json.loads(sys.argv[1])))\n")
    self.assertIn(f"accepted {len(commands)}", python_output(self, code, json.dumps(commands)))

  def test_commands_are_read_from_spans_blocks_and_continued_lines(self):
    text = ("Run `python -m benchmarks.communication.comm_volume --all\n  --paper_sizes` (or "
            "not).\n"
            "```bash\n# on each host\npython main.py --config=configs/hybrid4.py \\\n"
            "    --num_processes=N --process_id=I  # the coordinator\n```\n"
            "`python -m benchmarks.NAME` runs each.\n")
    self.assertEqual(list(commands_in(text)), [
        ("main.py", ["--config=configs/hybrid4.py", "--num_processes=2", "--process_id=0"]),
        ("benchmarks.communication.comm_volume", ["--all", "--paper_sizes"])])

  def test_large_batch_refuses_bad_settings_before_training(self):
    with tempfile.TemporaryDirectory() as out:
      result = subprocess.run(
          [sys.executable, "-m", "benchmarks.papers.large_batch", f"--out={out}",
           "--models=alexnet", "--batches=64", "--rules=lars", "--epochs=15",
           "--warmup_epochs=20"],
          cwd=ROOT, capture_output=True, text=True, timeout=300)
      self.assertEqual(result.returncode, 1, result.stderr[-2000:])
      self.assertEqual(result.stderr.strip(), "error: warmup_epochs 20.0 is longer than the "
                       "run's num_epochs 15.")
      self.assertEqual(os.listdir(out), [])  # nothing trained, nothing written.

  def test_large_batch_adds_seeds_to_a_setting_and_trains_none_twice(self):
    # Seed 0, then seeds 0-1: the second run trains only seed 1 of `none`, and `linear` (the same
    # run at the reference batch) takes each seed's result from it rather than training.
    def sweep(out, seeds):
      result = subprocess.run(
          [sys.executable, "-m", "benchmarks.papers.large_batch", f"--out={out}",
           "--models=alexnet_owt_tiny", "--batches=32", "--rules=none,linear", "--epochs=1",
           f"--seeds={seeds}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
      self.assertEqual(result.returncode, 0, result.stderr[-2000:])
      _, rows = benchmarks.load_results(os.path.join(out, "large_batch.json"))
      return result.stdout.count('"seed": '), {r["rule"]: r for r in rows}
    with tempfile.TemporaryDirectory() as out:
      trained, first = sweep(out, "0")
      self.assertEqual(trained, 1)
      trained, rows = sweep(out, "0,1")
      self.assertEqual(trained, 1)
    none, linear = rows["none"], rows["linear"]
    self.assertEqual((none["seeds"], linear["seeds"], linear["same_run_as"]),
                     ([0, 1], [0, 1], "none"))
    self.assertEqual(none["eval_top1"][0], first["none"]["eval_top1"][0])  # kept, not retrained.
    self.assertEqual(linear["eval_top1"], none["eval_top1"])
    self.assertAlmostEqual(none["eval_top1_mean"], sum(none["eval_top1"]) / 2, places=6)

  def test_large_batch_cells_are_configs_validation_accepts(self):
    # Every cell of the sweep, the --grid and --quick at the default flags (--quick's warmup once
    # outlasted its 2 epochs, and the run failed at its third cell). In a process of its own:
    # the benchmark's flags must be parsed to make its cells.
    code = ("from absl import flags\n"
            "import experiment\n"
            "from benchmarks.papers import large_batch\n"
            "flags.FLAGS(['large_batch'])\n"
            "for grid, quick in ((False, False), (True, False), (False, True)):\n"
            "  for _, model, batch, rule, settings in large_batch.cells(grid=grid, quick=quick):\n"
            "    experiment.resolve(large_batch.cell_config(model, batch, rule, **settings,\n"
            "                                               seed=0))\n"
            "print('checked')\n")
    self.assertEqual(python_output(self, code).strip(), "checked")

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
