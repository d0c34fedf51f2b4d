"""The base install (`pip install -r requirements.txt` alone) as a user meets it: every command the
docs give that needs an extra ends in one `error:` sentence naming what to install, never a
traceback; a run that is started again is refused when its config changes the training and goes
on when it is extended; a run on a CPU prints no accelerator's complaints. The extras' packages
are made missing for main.py's and the commands' processes (tests.testing.environment_without)."""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import sklearn
from absl.testing import absltest

import train
from benchmarks import docs as docs_pages
from configs import single
from hybrid_parallel import accelerators
from tests import testing
from tests.docs_test import documented_commands

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The documented commands that need more than the base install: what their one sentence tells a
# user to install, and what the page that gives the command says of it (any one of these).
NEEDS = {
    "benchmarks.speed.input_pipeline": ("install the imagenet extra (pip install -r "
                                        "requirements-imagenet.txt", ("requirements-imagenet",)),
    "input_pipeline.prepare": ("install the imagenet extra (pip install -r "
                               "requirements-imagenet.txt", ("requirements-imagenet",)),
    "benchmarks.reliability.soak": ("install the test extra (pip install -r "
                                    "requirements-test.txt", ("requirements-test",)),
    "benchmarks.speed.tpu_compile": ("install the tpu extra (pip install -r requirements-tpu.txt",
                                     ("requirements-tpu", "requirements-test.txt installs libtpu")),
    "benchmarks.speed.gpu_compile": ("pip install -r requirements-cuda13.txt",
                                     ("requirements-cuda13",)),
    "benchmarks.speed.pytorch_reference": ("pip install torch", ("torch",)),
}
# Entry points that import a package outside the base install and still end in a result
# without it: each section of the accelerator study records its own error (accelerator_test).
RESULT_WITHOUT_IT = ("benchmarks.speed.accelerator",)
MISSING = (*testing.NOT_IN_THE_BASE_INSTALL, "torch")

# A real JPEG (scikit-learn ships it), for a folder as `prepare --source=folder:PATH` reads one.
PHOTO = os.path.join(os.path.dirname(sklearn.__file__), "datasets", "images", "china.jpg")


def imported_packages(path: str) -> set[str]:
  """The top-level packages a module's own source imports, anywhere in it."""
  with open(path) as f:
    tree = ast.parse(f.read())
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names |= {alias.name.split(".")[0] for alias in node.names}
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      names.add(node.module.split(".")[0])
  return names


def entry_points() -> dict[str, str]:
  """Every module a user runs (`python -m NAME`) → its path."""
  found = {}
  for folder in ("benchmarks", "input_pipeline"):
    for directory, _, files in os.walk(os.path.join(ROOT, folder)):
      for name in files:
        path = os.path.join(directory, name)
        with open(path) as f:
          if name.endswith(".py") and 'if __name__ == "__main__":' in f.read():
            found[os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")] = path
  return found


class DocumentedCommandsTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.env = testing.environment_without(os.path.join(cls.tmp, "site"), MISSING)
    cls.folder = os.path.join(cls.tmp, "photos")
    for split in ("train", "val"):
      os.makedirs(os.path.join(cls.folder, split, "china"))
      shutil.copy(PHOTO, os.path.join(cls.folder, split, "china"))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def test_every_entry_point_that_imports_an_extra_is_held_here(self):
    for module, path in entry_points().items():
      if imported_packages(path) & set(MISSING):
        self.assertIn(module, (*NEEDS, *RESULT_WITHOUT_IT))

  def test_each_command_that_needs_an_extra_says_what_to_install_in_one_line(self):
    # Each program's documented commands, one per kind of input (--publish left out: a command
    # that went past its check would write docs/), and the folder of JPEGs with no decoder; all
    # at once, from a directory of their own.
    commands = {}
    for _, program, argv in documented_commands():
      argv = [a for a in argv if a != "--publish"]
      if program in NEEDS and (argv or program != "input_pipeline.prepare"):
        source = next((a for a in argv if a.startswith("--source=")), "").split(":")[0]
        commands.setdefault((program, source), argv)
    commands[("input_pipeline.prepare", "folder")] = [f"--source=folder:{self.folder}",
                                                      "--out=folder_jpeg"]
    commands[("input_pipeline.prepare", "folder decoded")] = [
        f"--source=folder:{self.folder}", "--out=folder_decoded", "--format=decoded"]
    runs = {key: subprocess.Popen([sys.executable, "-m", key[0], *argv], cwd=self.tmp,
                                  env={**self.env, "PYTHONPATH": f"{ROOT}{os.pathsep}"
                                       f"{self.env['PYTHONPATH']}"},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for key, argv in commands.items()}
    self.assertGreaterEqual(len(runs), 8)
    for (program, source), process in runs.items():
      with self.subTest(program=program, source=source):
        _, stderr = process.communicate(timeout=300)
        self.assertEqual(process.returncode, 1, stderr[-3000:])
        self.assertNotIn("Traceback", stderr)
        errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
        self.assertLen(errors, 1, stderr[-3000:])
        self.assertIn(NEEDS[program][0], errors[0])
    # Nothing was written: each stopped before any work.
    self.assertEqual(sorted(os.listdir(self.tmp)), ["photos", "site"])

  def test_each_page_that_gives_such_a_command_says_what_it_needs(self):
    for page, program, argv in documented_commands():
      if program in NEEDS and (argv or program != "input_pipeline.prepare"):
        with open(os.path.join(ROOT, page)) as f:
          text = f.read()
        with self.subTest(page=page, program=program):
          self.assertTrue(any(said in text for said in NEEDS[program][1]))
    # TensorBoard, which shows a run's curves, is no command of the project's.
    for page in docs_pages.pages(ROOT):
      with open(page) as f:
        text = f.read()
      for found in re.finditer(r"tensorboard --logdir", text):
        with self.subTest(page=page):
          self.assertRegex(text[found.start() - 300:found.end() + 300],
                           r"pip install (-r requirements-test\.txt|tensorboard)")


class BaseInstallRunTest(absltest.TestCase):
  """main.py started again in the base install, on a machine without an accelerator as a user
  has it (JAX_PLATFORMS unset)."""

  FIELDS = dict(model="alexnet_tiny", global_batch_size=32, eval_batch_size=120,
                num_train_steps=2, log_every_steps=1, lr_decay="constant")

  def setUp(self):
    super().setUp()
    tmp = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
    self.workdir = os.path.join(tmp, "run")
    config = single.get_config()
    config.update(self.FIELDS)
    train.train_config(config, self.workdir)
    self.env = {**testing.environment_without(os.path.join(tmp, "site")), "JAX_PLATFORMS": ""}

  def run_main(self, **changes):
    fields = dict(self.FIELDS, **changes)
    return subprocess.run([sys.executable, os.path.join(ROOT, "main.py"),
                           "--config=configs/single.py", f"--workdir={self.workdir}",
                           *(f"--config.{k}={v}" for k, v in fields.items())], cwd=ROOT,
                          env=self.env, capture_output=True, text=True, timeout=600)

  @unittest.skipUnless(accelerators.only_the_cpu_can_run(),
                       "needs a machine without an accelerator: no accelerator's complaint is "
                       "what it shows")
  def test_a_changed_training_is_refused_and_an_extended_run_goes_on_quietly(self):
    written = testing.digest(self.workdir)
    refused = self.run_main(base_learning_rate=0.05, momentum=0.8, dropout_rate=0.3,
                            num_train_steps=3)
    self.assertEqual(refused.returncode, 1, refused.stderr[-3000:])
    self.assertNotIn("Traceback", refused.stderr)
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error: ")]
    self.assertLen(errors, 1, refused.stderr[-3000:])
    self.assertIn("was written by a run with dropout_rate 0.5, momentum 0.9 and "
                  "base_learning_rate 0.01, but this run has dropout_rate 0.3, momentum 0.8 and "
                  "base_learning_rate 0.05; use another --workdir", errors[0])
    self.assertEqual(testing.digest(self.workdir), written)

    extended = self.run_main(num_train_steps=3)
    self.assertEqual(extended.returncode, 0, extended.stderr[-3000:])
    with open(os.path.join(self.workdir, "metrics.jsonl")) as f:
      steps = [json.loads(line)["step"] for line in f if "train_loss" in line]
    self.assertEqual(steps, [1, 2, 3])
    # No accelerator backend was tried: JAX says nothing of libtpu, a TPU or CUDA.
    complaints = [line for line in extended.stderr.splitlines()
                  if re.search(r"libtpu|backend 'tpu'|TPU|cuda|CUDA", line)]
    self.assertEqual(complaints, [])


if __name__ == "__main__":
  absltest.main()
