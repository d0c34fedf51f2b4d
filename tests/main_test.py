"""main.py as a user runs it: what only the machine can tell is one sentence and exit 1; a run
writes its metrics and a profile."""

import contextlib
import glob
import gzip
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from absl.testing import absltest, parameterized

from hybrid_parallel import accelerators, platforms
from tests import testing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--config.model=alexnet_tiny", "--config.image_size=64"]


def run_main(*args, cwd=ROOT, env=None):
  return subprocess.run([sys.executable, os.path.join(ROOT, "main.py"), *args], cwd=cwd,
                        capture_output=True, text=True, timeout=300,
                        env={**os.environ, **(env or {})})


def nvidia_smi_listing(folder: str, listing: str) -> str:
  """A PATH on which `nvidia-smi -L` prints `listing`, as on a machine with NVIDIA GPUs (this
  one has none; JAX's CPU build runs either way)."""
  path = os.path.join(folder, "nvidia-smi")
  with open(path, "w") as f:
    f.write(f"#!/bin/sh\ncat <<'EOF'\n{listing}\nEOF\n")
  os.chmod(path, 0o755)
  return folder + os.pathsep + os.environ.get("PATH", "")


def said_in_order(test: absltest.TestCase, output: str, *patterns: str) -> list[str]:
  """The lines of `output` that match `patterns` (regular expressions), after asserting that each
  matches exactly one line and that they come in this order."""
  lines = output.splitlines()
  found = []
  for pattern in patterns:
    at = [i for i, line in enumerate(lines) if re.search(pattern, line)]
    test.assertLen(at, 1, f"{pattern!r} in:\n{output[-3000:]}")
    found.append(at[0])
  test.assertEqual(found, sorted(found), output[-3000:])
  return [lines[i] for i in found]


class BadInputTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.garbage = os.path.join(cls.tmp, "garbage.npz")
    with open(cls.garbage, "wb") as f:
      f.write(b"\x00" * 64)

  # What only the machine can tell, found as a user would meet it (the config's own values:
  # tests/validation_test.py).
  @parameterized.named_parameters(
      ("malformed_npz", ["--config={root}/configs/single.py", "--config.dataset=npz:{garbage}"],
       "is not a readable .npz file"),
      ("unprepared_imagenet", ["--config={root}/configs/single.py", "--config.dataset=imagenet2012",
                               "--config.data_dir={tmp}/no_data"],
       # Without TensorFlow, that it is missing is what is wrong first.
       "is not installed here" if testing.WITHOUT_TENSORFLOW else
       "imagenet2012 is not prepared in"),
  )
  def test_one_sentence_and_exit_1(self, args, message):
    # main.py's parsing and main() in this process (testing.main_in_process): a process of its
    # own would add nothing but its start.
    args = [a.format(garbage=self.garbage, tmp=self.tmp, root=ROOT) for a in args]
    code, stderr = testing.main_in_process([*args, f"--workdir={self.tmp}/run"])
    self.assertEqual(code, 1, stderr[-2000:])
    self.assertNotIn("Traceback", stderr)
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    self.assertLen(errors, 1)
    self.assertIn(message, errors[0])
    self.assertFalse(os.path.exists(f"{self.tmp}/run/metrics.jsonl"))  # failed before training.


class RunTest(absltest.TestCase):

  def run_with_sitecustomize(self, code: str, *args: str):
    """(a temporary folder, main.py's run of single.py there) with `code` run first in its
    process (a sitecustomize: a machine without a package, a device without memory)."""
    tmp = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
    env = testing.environment_with_sitecustomize(f"{tmp}/site", code)
    # The sitecustomize runs before Python adds main.py's folder to the places it imports from:
    # the code may import the project's modules (train), so the repository root is given.
    env["PYTHONPATH"] = testing.pythonpath_with(os.pathsep.join([f"{tmp}/site", ROOT]))
    return tmp, run_main("--config=configs/single.py", *args, f"--workdir={tmp}/run", env=env)

  def error_lines(self, result) -> list[str]:
    """The `error:` lines of a run that failed as a user's run should: exit 1, no traceback."""
    self.assertEqual(result.returncode, 1, result.stderr[-2000:])
    self.assertNotIn("Traceback", result.stderr)
    return [line for line in result.stderr.splitlines() if line.startswith("error: ")]

  def test_a_tfds_dataset_without_tensorflow_is_one_sentence(self):
    # A machine without TensorFlow (a GPU machine may have none): simulated for main.py's
    # process by a sitecustomize that makes `import tensorflow` fail as a missing package does.
    tmp, result = self.run_with_sitecustomize(testing.without_modules(["tensorflow"]),
                                              "--config.dataset=mnist")
    self.assertEqual(self.error_lines(result), [
        "error: dataset 'mnist' is read by tensorflow-datasets, and tensorflow is not installed "
        "here: install the imagenet extra (pip install -r requirements-imagenet.txt, or pip "
        "install \".[imagenet]\"), or prepare the dataset where TensorFlow is (python -m "
        "input_pipeline.prepare) and train on prepared:DIR."])
    self.assertFalse(os.path.exists(f"{tmp}/run/metrics.jsonl"))

  def test_devices_out_of_memory_is_one_sentence_naming_the_fixes(self):
    # XLA's RESOURCE_EXHAUSTED from the run (a CPU does not run out of memory on command):
    # raised in main.py's own process by a sitecustomize in place of the training loop.
    _, result = self.run_with_sitecustomize(
        "import jax, train\n"
        "def out_of_memory(*args, **kwargs):\n"
        "  raise jax.errors.JaxRuntimeError('RESOURCE_EXHAUSTED: Out of memory while trying to "
        "allocate 68.00GiB.\\nBuffer assignment: ...')\n"
        "train.train_and_evaluate = out_of_memory\n")
    self.assertEqual(self.error_lines(result), [
        "error: the devices ran out of memory (RESOURCE_EXHAUSTED: Out of memory while trying to "
        "allocate 68.00GiB.): on a GPU JAX takes 75% of its memory unless "
        "XLA_PYTHON_CLIENT_MEM_FRACTION says more (set it to 0.95 before the command), else lower "
        "--config.global_batch_size or split each step's batch with --config.microbatches=K (the "
        "same update, in K passes)."])

  @unittest.skipUnless(accelerators.only_the_cpu_can_run(), "needs a machine without an "
                       "accelerator: the dry run says where the mesh would run")
  def test_the_dry_run_says_where_the_mesh_runs(self):
    result = run_main("--config=configs/owt8.py", "--dry_run", env={"JAX_PLATFORMS": ""})
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertEqual(json.loads(result.stdout)["devices"],
                     "8 simulated CPU device(s) per process: JAX runs on the CPU here.")

  def test_resnet50_is_a_model_the_dry_run_resolves(self):
    # main.py's parsing and main() in this process (testing.main_in_process): what is asked is
    # the run the flags resolve to, to which a process of its own adds nothing but its start.
    def dry_run(*args):
      stdout = io.StringIO()
      with contextlib.redirect_stdout(stdout):
        code, stderr = testing.main_in_process([*args, "--dry_run"])
      return code, stdout.getvalue(), stderr

    for scheme in ("single.py", "hybrid4.py"):
      code, stdout, stderr = dry_run(f"--config={ROOT}/configs/{scheme}",
                                     "--config.model=resnet50", "--config.image_size=224")
      self.assertEqual(code, 0, stderr[-3000:])
      self.assertEqual(json.loads(stdout)["model"]["name"], "resnet50")
    code, _, stderr = dry_run(f"--config={ROOT}/configs/averaging4.py", "--config.model=resnet50")
    self.assertEqual(code, 1)
    self.assertIn("error: parallelism 'averaging' keeps no batch-norm statistics; train a model "
                  "with batch norm with a synchronous scheme (single, data, model, hybrid, owt).",
                  stderr)

  # With an accelerator, JAX_PLATFORMS unset puts main.py's default backend on it (one GPU
  # cannot hold the 2×2 mesh: main.py refuses it without --cpu_devices, mesh_test's).
  @unittest.skipUnless(accelerators.only_the_cpu_can_run(),
                       "needs a machine without an accelerator: this is the run such a machine "
                       "simulates its devices for")
  def test_hybrid4_simulates_its_devices_writes_metrics_and_a_profile_to_its_default_workdir(self):
    with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryDirectory() as bin_dir:
      gpu = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"
      # No --workdir: the run goes to runs/<the config file's name> under the working directory.
      # A batch of 16 (hybrid4's is 256): what is asked of the run does not depend on it.
      result = run_main(f"--config={ROOT}/configs/hybrid4.py", *TINY,
                        "--config.global_batch_size=16", "--config.num_train_steps=4",
                        "--config.log_every_steps=2",
                        "--config.profile_steps=2", cwd=cwd,
                        # JAX_PLATFORMS unset, as a user has it (the suite sets it to cpu).
                        env={"PATH": nvidia_smi_listing(bin_dir, gpu), "JAX_PLATFORMS": ""})
      self.assertEqual(result.returncode, 0, result.stderr[-3000:])
      self.assertIn("JAX runs on the CPU: simulating 4 CPU devices for the 2×2 mesh",
                    result.stderr)
      # A GPU JAX cannot use is named, with the install command that would use it (where this
      # JAX has a CUDA plugin — the test requirements' compile-only one — it could use one).
      if not any(map(importlib.util.find_spec, platforms.CUDA_PLUGINS)):
        self.assertIn("GPU 0: NVIDIA H100 80GB HBM3 present, but this jaxlib has no CUDA "
                      "backend and JAX runs on the CPU; for the GPU: pip install -r "
                      "requirements-cuda12.txt", result.stderr)
      self.assertIn("wrote a profile of steps 2–3", result.stderr)
      # It says that it compiles, then the compile's seconds and the first step's, before the
      # first log step's line.
      said = said_in_order(self, result.stderr,
                           re.escape("compiling the step for the 2×2 mesh (hybrid) …"),
                           r"compiled in \d+\.\d s; the first step ran in \d+\.\d\d s\.",
                           r"step 2/4 \| loss [\d.]+ \| .* \| ETA \d+m\d\ds")
      self.assertLen(said, 3)
      # With no TPU attached JAX was kept from opening libtpu (installed with the test
      # requirements), whose complaints would start with this.
      self.assertNotIn("could not determine TPU", result.stderr)
      workdir = os.path.join(cwd, "runs", "hybrid4")
      with open(os.path.join(workdir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
      traces = glob.glob(os.path.join(workdir, "profile/plugins/profile/*/*.trace.json.gz"))
      self.assertLen(traces, 1)
      with gzip.open(traces[0], "rt") as f:
        events = json.load(f)["traceEvents"]
    self.assertEqual([r["step"] for r in rows], [2, 4, 4])
    self.assertIn("eval_top1", rows[-1])
    # The trace holds two runs of the train step: the one after the compile, and the next.
    runs = [e for e in events if e.get("name") == "CommonPjRtLoadedExecutable::Execute "
            "(jit_train_step)"]
    self.assertLen(runs, 2)


if __name__ == "__main__":
  absltest.main()
