"""Every path the CLI accepts, walked through main.py's own entry: scheme × backend × data source
(the decoded set under each placement) × process count. Each cell trains — its losses equal to
one device's where the mathematics says so (every scheme here: the local-SGD schemes meet every
step, which is synchronous SGD) — or is refused before any work in one sentence. The full
product does not fit the suite's time, so the cells cover every pair of scheme, backend and
source (`all_pairs`); two of them run again as two processes. The table of cells and outcomes
is printed.

main.py runs in this process (its flag parsing and main(): testing.main_in_process) with the
suite's 8 simulated CPU devices standing in for what main.py would simulate; the two-process
cells run main.py as two processes, as a user starts them.
"""

import contextlib
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from unittest import mock

import jax
import numpy as np
from absl.testing import absltest

from hybrid_parallel import checkpointing
from input_pipeline import arrays, decoded
from tests import numerics, testing
from tests.decoded_input_test import model_sized_sets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each scheme on the smallest mesh that shows it.
SCHEMES = {"single": (1, 1), "data": (2, 1), "model": (1, 2), "hybrid": (2, 2), "owt": (2, 2),
           "averaging": (2, 1), "asgd": (2, 1)}
BACKENDS = ("explicit", "gspmd", "pmap")
SOURCES = ("digits", "npz", "synthetic", "prepared", "decoded host", "decoded devices",
           "decoded split")
# What the backends do not run, and the sentence that says so (steps/common.py's rules, as the
# README states them: gspmd runs the synchronous schemes, pmap those that split the batch only).
REFUSED = {("gspmd", scheme): f"backend 'gspmd' runs the schemes single, data, model, hybrid, "
                              f"owt; parallelism '{scheme}' needs the explicit backend."
           for scheme in ("averaging", "asgd")}
REFUSED.update({("pmap", scheme): f"backend 'pmap' runs the schemes single, data; parallelism "
                                  f"'{scheme}' needs the explicit backend."
                for scheme in ("model", "hybrid", "owt", "averaging", "asgd")})
# The run of every cell: alexnet_tiny at 64², batch 16, two steps, each logged; the local-SGD
# schemes meet after every step (A-SGD in lock-step, no stagger), which is synchronous SGD.
FIELDS = {"model": "alexnet_tiny", "image_size": 64, "global_batch_size": 16,
          "eval_batch_size": 8, "num_train_steps": 2, "log_every_steps": 1,
          "checkpoint_every_steps": 0, "lr_decay": "constant", "base_learning_rate": 0.1,
          "sync_every": 1, "n_push": 1, "n_fetch": 1, "asgd_stagger": False}
# The synthetic set (and the npz file's): three classes, as the photographs' folder has
# (model_sized_sets).
SYNTHETIC = {"synthetic_examples": 48, "synthetic_classes": 3}
# The train step's program, as XLA names it: the synchronous schemes', the local-SGD schemes'.
STEP_PROGRAMS = ("jit(train_step)", "jit(per_device_step)")
# What pmap says to a job of several processes.
PMAP_ALONE = "backend 'pmap' runs in one process here; use the explicit backend with several"


# The cells: each scheme with each source once, on the backend its letter names (explicit, gspmd,
# pmap), chosen so that every pair of two axes' values meets — a backend and a source only where
# the cell trains (pmap trains single and data alone: between them, every source). The npz file
# holds the synthetic set, so a scheme that trains on both takes one backend for the two: one
# program, compiled once for them (the persistent compilation cache). single runs on the explicit
# backend on the sources whose one-device run is a reference (synthetic, prepared, the decoded
# set on the devices): the cell is that run. model meets pmap on the split set, the one cell of
# model's row that cannot train anyway (its mesh has no data axis to split over).
#              digits npz synthetic prepared host devices split (decoded)
BACKEND_OF = {"single":    "peeepeg",
              "data":      "epppgpp",
              "model":     "geegegp",
              "hybrid":    "eeeepeg",
              "owt":       "eggeegp",
              "averaging": "gpeeeee",
              "asgd":      "eepgeee"}


def all_pairs() -> list[tuple[str, str, str]]:
  """The cells (scheme, backend, source) of BACKEND_OF."""
  letters = {backend[0]: backend for backend in BACKENDS}
  return [(scheme, letters[row[j]], source) for scheme, row in BACKEND_OF.items()
          for j, source in enumerate(SOURCES)]


def flags_of(fields: dict) -> list[str]:
  return [f"--config.{k}={v}" for k, v in fields.items()]


def rows(workdir: str) -> list[dict]:
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f]


def losses(workdir: str) -> dict:
  """What a cell's run is judged by: its training losses and its final evaluation's loss."""
  logged = rows(workdir)
  return {"train": np.array([r["train_loss"] for r in logged if "train_loss" in r]),
          "eval": np.array([r["eval_loss"] for r in logged if "eval_loss" in r][-1:])}


def refusal(scheme: str, backend: str, source: str) -> str | None:
  """How the sentence that refuses a cell starts, or None where the cell trains: a backend that
  does not run the scheme; a set to split over the data axis of a mesh that has none."""
  if (backend, scheme) in REFUSED:
    return REFUSED[backend, scheme]
  if source == "decoded split" and SCHEMES[scheme][0] == 1:
    return "decoded_placement 'split' shares the set's rows over the mesh's data axis, and this mesh has 1 data shard"
  return None


# Where a decoded set goes (decoded.Placement.where), by the cell's placement.
SETTLED = {"decoded host": "host", "decoded devices": "whole", "decoded split": "split"}


class _Cells:
  """The cells of SOURCES (a subclass's), with the sets they read and one device's losses on
  each: a TestCase per reference (the sources that share one device's run), so that the suite's
  processes share the cells and each reference is computed by one of them (pytest-xdist's
  loadscope sends a class to one process). Those of TWO_PROCESSES run again as two processes of
  main.py."""

  SOURCES = ()
  TWO_PROCESSES = ()

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.runs = {}  # (scheme, backend, source, dtype): its run (`run_once`).
    # The npz file holds the synthetic set's arrays: two readers of one set, which train alike
    # (one reference serves both, and a scheme's program, made for the same arrays, is compiled
    # once for the two).
    synthetic = arrays.load("synthetic", image_size=64, seed=0, **SYNTHETIC)  # the run's seed.
    cls.npz = os.path.join(cls.tmp, "synthetic.npz")
    np.savez(cls.npz, x_train=synthetic.x_train, y_train=synthetic.y_train,
             x_test=synthetic.x_test, y_test=synthetic.y_test)
    if any(source.startswith(("prepared", "decoded")) for source in cls.SOURCES):
      # A folder of real JPEGs (one broken among them), prepared as a decoded set and (where
      # the class reads them) as JPEG records, as a user prepares ImageNet.
      cls.jpegs, cls.decoded = model_sized_sets(cls.tmp, jpeg="prepared" in cls.SOURCES)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def source_fields(self, source: str) -> dict:
    """The config fields that choose `source`."""
    if source == "digits":
      return {"dataset": "digits", "eval_batch_size": 360}  # digits' test set, in one batch.
    if source == "npz":
      return {"dataset": f"npz:{self.npz}"}
    if source == "synthetic":
      return {"dataset": "synthetic", **SYNTHETIC}
    if source == "prepared":
      return {"dataset": f"prepared:{self.jpegs}", "input_workers": 0}
    return {"dataset": f"decoded:{self.decoded}", "decoded_placement": source.split()[1]}

  @contextlib.contextmanager
  def placed(self, source: str):
    """Yields where the decoded set was put (a list, filled when it is)."""
    settled = []
    if not source.startswith("decoded"):
      yield settled
      return
    real = decoded.DecodedDataset.placed

    def placed(dataset, placement):
      settled.append(placement.where)
      return real(dataset, placement)

    with mock.patch.object(decoded.DecodedDataset, "placed", placed):
      yield settled

  def arguments(self, scheme: str, backend: str, source: str, **overrides) -> list[str]:
    """main.py's arguments for a cell, with a workdir of its own."""
    data, model = SCHEMES[scheme]
    fields = {**FIELDS, "parallelism": scheme, "mesh.data": data, "mesh.model": model,
              "backend": backend, **self.source_fields(source), **overrides}
    return [f"--config={ROOT}/configs/default.py",
            f"--workdir={tempfile.mkdtemp(dir=self.tmp)}/run", *flags_of(fields)]

  def train(self, scheme: str, backend: str, source: str, **overrides):
    """main.py's run of one cell: (exit status, stderr, workdir, where a decoded set went, the
    names of the programs XLA compiled or read from the persistent cache)."""
    args = self.arguments(scheme, backend, source, **overrides)
    with testing.compiled_programs() as compiled, self.placed(source) as settled:
      code, stderr = testing.main_in_process(args)
    return code, stderr, args[1].split("=", 1)[1], settled, compiled

  def run_once(self, scheme: str, backend: str, source: str, dtype: str = "float32"):
    """`train` of a cell in `dtype`, once per class: the cell (single, explicit, S) is the
    float32 reference run of S, the same command."""
    key = (scheme, backend, source, dtype)
    if key not in self.runs:
      with jax.enable_x64(dtype == "float64"):
        self.runs[key] = self.train(scheme, backend, source,
                                    **({"dtype": dtype} if dtype != "float32" else {}))
    return self.runs[key]

  def reference(self, source: str) -> tuple[dict, dict]:
    """One device's losses on `source`'s data (the npz file's are the synthetic set's; a
    decoded set's placement changes where rows are gathered, not which), in float32 and (the
    exact answer) in float64."""
    source = {"npz": "synthetic", "decoded host": "decoded devices",
              "decoded split": "decoded devices"}.get(source, source)
    runs = []
    for dtype in ("float32", "float64"):
      code, stderr, workdir, *_ = self.run_once("single", "explicit", source, dtype)
      self.assertEqual(code, 0, stderr[-3000:])
      runs.append(losses(workdir))
    return tuple(runs)

  def test_each_cell_trains_as_one_device_or_is_refused_in_one_sentence(self):
    for scheme, backend, source in all_pairs():
      if source not in self.SOURCES:
        continue
      with self.subTest(scheme=scheme, backend=backend, source=source):
        cell = (scheme, backend, source, 1)
        record(cell, "failed")
        code, stderr, workdir, settled, compiled = self.run_once(scheme, backend, source)
        refused = refusal(scheme, backend, source)
        if refused:
          self.assertEqual(code, 1, stderr[-3000:])
          errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
          self.assertLen(errors, 1, stderr[-3000:])
          self.assertStartsWith(errors[0], f"error: {refused}")
          self.assertNotIn("Traceback", stderr)
          self.assertFalse(os.path.exists(os.path.join(workdir, "metrics.jsonl")))
          # Before any work: no program compiled, no set placed.
          self.assertEqual((compiled, settled), ([], []))
          record(cell, "refused: " + errors[0][len("error: "):].split(";")[0])
          continue
        self.assertEqual(code, 0, stderr[-3000:])
        if source in SETTLED:
          self.assertEqual(settled, [SETTLED[source]])
        self.assertLen(losses(workdir)["train"], 2)
        # Its train step is one program, compiled (or read from the cache) once: the state
        # leaves a step where the next step takes it; a set placed on the devices is weighed
        # against that same program's memory (experiment.feed).
        self.assertEqual(sum(map(compiled.count, STEP_PROGRAMS)), 1, compiled)
        numerics.assert_as_accurate(losses(workdir), *self.reference(source))
        record(cell, "trained; losses = 1 device's")


  def test_two_processes_train_as_one_device_or_are_refused(self):
    for scheme, backend, source in self.TWO_PROCESSES:
      with self.subTest(scheme=scheme, backend=backend, source=source):
        cell = (scheme, backend, source, 2)
        record(cell, "failed")
        args = self.arguments(scheme, backend, source)
        with socket.socket() as s:
          s.bind(("127.0.0.1", 0))
          port = s.getsockname()[1]
        processes = [subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "main.py"), *args, "--num_processes=2",
             f"--coordinator_address=127.0.0.1:{port}", f"--process_id={i}"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for i in range(2)]
        self.addCleanup(lambda: [p.kill() for p in processes if p.poll() is None])
        ended = [process.communicate(timeout=600)[1] for process in processes]
        workdir = args[1].split("=", 1)[1]
        if backend == "pmap":
          for process, stderr in zip(processes, ended):
            self.assertEqual(process.returncode, 1, stderr[-3000:])
            errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
            self.assertLen(errors, 1, stderr[-3000:])
            self.assertIn(PMAP_ALONE, errors[0])
          self.assertFalse(os.path.exists(os.path.join(workdir, "metrics.jsonl")))
          record(cell, "refused: " + PMAP_ALONE.split(";")[0])
          continue
        for process, stderr in zip(processes, ended):
          self.assertEqual(process.returncode, 0, stderr[-3000:])
        numerics.assert_as_accurate(losses(workdir), *self.reference(source))
        # Both processes wrote the final checkpoint, one state that one process reads.
        state = checkpointing.read_numpy(os.path.join(workdir, "checkpoints"), 2)
        self.assertEqual(int(state["step"]), 2)
        record(cell, "trained; losses = 1 device's")


def record(cell, outcome: str) -> None:
  """Notes a cell's outcome in the table the suite prints at its end (tests/conftest.py)."""
  table = os.environ.get("PATH_MATRIX_TABLE")
  if table:
    with open(table, "a") as f:
      f.write(json.dumps({"cell": cell, "outcome": outcome}) + "\n")


class DigitsTest(_Cells, absltest.TestCase):
  SOURCES = ("digits",)
  # pmap, which runs one process.
  TWO_PROCESSES = (("data", "pmap", "digits"),)


class InMemorySourcesTest(_Cells, absltest.TestCase):
  """The synthetic set, made in memory and read from an npz file: one reference."""
  SOURCES = ("npz", "synthetic")
  # A model axis across the processes (one device each: each process feeds the whole batch).
  TWO_PROCESSES = (("model", "explicit", "npz"),)


class PreparedSourcesTest(_Cells, absltest.TestCase):
  SOURCES = ("prepared",)
  # The data axis across the processes under XLA's partitioning, each reading its own rows.
  TWO_PROCESSES = (("hybrid", "gspmd", "prepared"),)


class DecodedSourcesTest(_Cells, absltest.TestCase):
  """The decoded set under each placement: one reference."""
  SOURCES = ("decoded host", "decoded devices", "decoded split")


class PairsTest(absltest.TestCase):

  def test_every_pair_of_scheme_backend_and_source_meets(self):
    cells = all_pairs()
    trained = [cell for cell in cells if not refusal(*cell)]
    self.assertEqual({(s, b) for s, b, _ in cells}, set(itertools.product(SCHEMES, BACKENDS)))
    self.assertEqual({(b, source) for _, b, source in trained},
                     set(itertools.product(BACKENDS, SOURCES)))
    self.assertEqual({(s, source) for s, _, source in cells},
                     set(itertools.product(SCHEMES, SOURCES)))
    self.assertEqual(set(SOURCES), {source for case in (DigitsTest, InMemorySourcesTest,
                                                        PreparedSourcesTest, DecodedSourcesTest)
                                    for source in case.SOURCES})


if __name__ == "__main__":
  absltest.main()
