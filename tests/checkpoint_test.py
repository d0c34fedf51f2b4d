"""Checkpoints in the real loop: resume across schemes, NaN guard, corrupt-checkpoint fallback."""

import dataclasses
import json
import os
import re
import shutil
import tempfile
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging
from absl.testing import absltest, parameterized

import experiment
import input_pipeline
import train
import validation
from configs import single
from hybrid_parallel import checkpointing, faults, train_state
from hybrid_parallel.errors import UserError
from tests import numerics, testing

BASE = dict(global_batch_size=32, eval_batch_size=120, base_learning_rate=0.05, lr_decay="constant",
            log_every_steps=1, eval_every_steps=1000, checkpoint_every_steps=2)


def config_for(scheme, data, model_ways, steps, **overrides):
  return testing.tiny_config(parallelism=scheme, mesh=dict(data=data, model=model_ways),
                             num_train_steps=steps, **dict(BASE, **overrides))


def metrics_rows(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f]


def saved_state(workdir, step):
  return checkpointing.read_numpy(os.path.join(workdir, "checkpoints"), step)


class ResumeTest(absltest.TestCase):

  def test_resume_across_schemes_matches_the_original_scheme(self):
    # hybrid 2×2 for 3 steps → data 4×1 to step 6 → single to step 9, in one workdir, against
    # hybrid 2×2 for 9 steps: the checkpoint is resharded onto each new mesh as it is read.
    with (tempfile.TemporaryDirectory() as moved, tempfile.TemporaryDirectory() as stayed,
          tempfile.TemporaryDirectory() as exact):
      for scheme, data, model, steps in (("hybrid", 2, 2, 3), ("data", 4, 1, 6),
                                         ("single", 1, 1, 9)):
        # Another scheme and mesh, asked for by name (unasked, they are refused: SameRunTest).
        train.train_config(config_for(scheme, data, model, steps), moved,
                           accept_changes=("parallelism", "mesh"))
      train.train_config(config_for("hybrid", 2, 2, 9), stayed)
      with jax.enable_x64(True):  # the same SGD's exact values (tests/numerics.py).
        train.train_config(config_for("single", 1, 1, 9, dtype="float64"), exact)
      got, expected = saved_state(moved, 9), saved_state(stayed, 9)
      earlier = saved_state(stayed, 6)  # checkpoint_keep = 3 keeps 6, 8 and 9.
      exact_state = saved_state(exact, 9)
    self.assertEqual(int(got["step"]), 9)
    moved_by = max(np.abs(a - b).max() for a, b in zip(jax.tree.leaves(expected["params"]),
                                                       jax.tree.leaves(earlier["params"])))
    self.assertGreater(moved_by, 1e-3)
    self.assertEqual(jax.tree.structure(got), jax.tree.structure(expected))
    numerics.assert_as_accurate(got, expected, exact_state)

  def test_a_checkpoint_written_before_is_read_and_trained_on(self):
    # tests/data/checkpoints_2026-11-25: step 2 of this config, written by the code of
    # 2026-11-25 (before the state's root key was made with jax.random.key and the initialisers
    # ran on one image). Today's state restores from it unchanged, and the run goes on from it.
    config = config_for("single", 1, 1, 3, global_batch_size=16, lr_decay="constant")
    with tempfile.TemporaryDirectory() as workdir:
      shutil.copytree(os.path.join(os.path.dirname(__file__), "data", "checkpoints_2026-11-25"),
                      os.path.join(workdir, "checkpoints"))
      written = saved_state(workdir, 2)
      train.train_config(config, workdir)
      resumed = saved_state(workdir, 3)
      with open(os.path.join(workdir, "metrics.jsonl")) as f:
        logged = [json.loads(line)["step"] for line in f if "train_loss" in line]
    self.assertEqual(logged, [3])  # it went on from step 2 (a fresh run logs steps 1, 2 and 3).
    np.testing.assert_array_equal(written["rng"], train_state.root_key_data(config.seed))
    self.assertEqual(int(resumed["step"]), 3)
    np.testing.assert_array_equal(resumed["rng"], written["rng"])
    moved = max(np.abs(a - b).max() for a, b in zip(jax.tree.leaves(resumed["params"]),
                                                     jax.tree.leaves(written["params"])))
    self.assertBetween(moved, 1e-6, 1.0)  # one more step from the written parameters.

  def test_a_checkpoint_of_another_model_is_refused(self):
    with tempfile.TemporaryDirectory() as workdir:
      train.train_config(config_for("single", 1, 1, 2), workdir)
      with self.assertRaisesRegex(UserError, "the checkpoint at step 2 .* was written by a run "
                                  "with model 'alexnet_tiny', but this run has model "
                                  "'alexnet_owt_tiny', and its training state cannot take that "
                                  "checkpoint's shapes; use another --workdir"):
        train.train_config(config_for("single", 1, 1, 4, model="alexnet_owt_tiny"), workdir,
                           accept_changes=("model",))  # asked for, it still cannot be.


class SameRunTest(parameterized.TestCase):
  """A restart goes on with the run its checkpoint holds: a change of the training is refused by
  name, extending it and changing how often it logs, evaluates or saves are not, and a change
  asked for goes on and is recorded."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.finished = os.path.join(cls.tmp, "finished")  # copied, never changed.
    train.train_config(cls.config(), cls.finished)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  # configs/single.py with these fields: the run main.py makes of the same flags.
  FIELDS = dict(model="alexnet_tiny", global_batch_size=32, eval_batch_size=120,
                num_train_steps=2, log_every_steps=1, lr_decay="constant")

  @classmethod
  def config(cls, **changes):
    config = single.get_config()
    config.update(dict(cls.FIELDS, **changes))
    return config

  def workdir(self) -> str:
    """A copy of the finished 2-step run, for one test to go on from."""
    workdir = os.path.join(tempfile.mkdtemp(dir=self.tmp), "run")
    shutil.copytree(self.finished, workdir)
    return workdir

  def test_the_checkpoint_records_the_resolved_config(self):
    checkpointer = checkpointing.Checkpointer(os.path.join(self.finished, "checkpoints"), 0, 1,
                                              {})
    self.addCleanup(checkpointer.close)
    step, meta = checkpointer.latest_meta()
    self.assertEqual(step, 2)
    self.assertEqual(meta["config"],
                     json.loads(json.dumps(experiment.resolve(self.config()).config_values())))
    self.assertEqual(meta["config"]["base_learning_rate"], 0.01)

  @parameterized.named_parameters(
      ("learning_rate", {"base_learning_rate": 0.05}, "base_learning_rate 0.01",
       "base_learning_rate 0.05"),
      ("momentum", {"momentum": 0.8}, "momentum 0.9", "momentum 0.8"),
      ("dropout", {"dropout_rate": 0.3}, "dropout_rate 0.5", "dropout_rate 0.3"),
      ("weight_decay", {"weight_decay": 0.0}, "weight_decay 0.0005", "weight_decay 0.0"),
      ("schedule", {"lr_decay": "cosine"}, "lr_decay 'constant'", "lr_decay 'cosine'"),
      ("dtype", {"dtype": "bfloat16"}, "dtype 'float32'", "dtype 'bfloat16'"),
      ("seed", {"seed": 1}, "seed 0", "seed 1"),
      ("data", {"dataset": "synthetic"}, "dataset 'digits'", "dataset 'synthetic'"),
      ("scheme", {"parallelism": "data", "mesh": {"data": 2, "model": 1}},
       "parallelism 'single' and mesh.data 1", "parallelism 'data' and mesh.data 2"),
  )
  def test_a_change_of_the_training_is_refused_by_name(self, changes, before, after):
    workdir = self.workdir()
    written = testing.digest(workdir)
    with self.assertRaises(UserError) as refused:
      train.train_config(self.config(num_train_steps=4, **changes), workdir)
    named = ",".join(part.split()[0] for part in before.split(" and "))
    values = "values" if "," in named else "value"
    self.assertEqual(str(refused.exception), (
        f"the checkpoint at step 2 in {workdir}/checkpoints was written by a run with {before}, "
        f"but this run has {after}; use another --workdir to start a new run, or put the "
        f"{values} back to continue that one (or continue it with the "
        f"{'changes' if ',' in named else 'change'} recorded in metrics.jsonl: "
        f"--accept_changes={named})."))
    self.assertEqual(testing.digest(workdir), written)  # refused before any work.

  def test_the_docs_list_the_fields_a_restart_may_change(self):
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "docs",
                           "faults.md")) as f:
      table = f.read().split("| may change |", 1)[1].split("\n\n", 1)[0]
    listed = {field for row in table.splitlines()[2:]
              for field in re.findall(r"`([\w.]+)`", row.split("|")[1])}
    self.assertEqual(listed, set(validation.RESTART_MAY_CHANGE))
    self.assertLess(listed, set(experiment.SETTINGS))

  def test_extended_with_other_frequencies_it_goes_on(self):
    workdir = self.workdir()
    train.train_config(self.config(num_train_steps=3, log_every_steps=3, eval_every_steps=3,
                                   checkpoint_every_steps=3, checkpoint_keep=2), workdir)
    rows = metrics_rows(workdir)
    self.assertEqual([r["step"] for r in rows if "train_loss" in r], [1, 2, 3])
    self.assertFalse([r for r in rows if "changed" in r])
    self.assertEqual(int(saved_state(workdir, 3)["step"]), 3)

  def test_a_change_asked_for_goes_on_and_is_recorded(self):
    workdir = self.workdir()
    with self.assertLogs(level="WARNING") as logs:
      train.train_config(self.config(num_train_steps=3, base_learning_rate=0.02), workdir,
                         accept_changes=("base_learning_rate",))
    said = [line for line in logs.output if "changes asked for" in line]
    self.assertLen(said, 1)
    self.assertIn(f"going on from the checkpoint at step 2 in {workdir}/checkpoints with "
                  f"changes asked for: base_learning_rate 0.01 → 0.02.", said[0])
    rows = metrics_rows(workdir)
    self.assertIn({"step": 2, "changed": {"base_learning_rate": [0.01, 0.02]}}, rows)
    (step_3,) = [r for r in rows if r["step"] == 3 and "train_loss" in r]
    # lr_decay constant: each step's rate is base × batch / 128, now from the new base.
    self.assertAlmostEqual(step_3["learning_rate"], 0.02 * 32 / 128, delta=1e-9)
    # The next checkpoint records the new value: the same config goes on unasked.
    train.train_config(self.config(num_train_steps=4, base_learning_rate=0.02), workdir)
    self.assertEqual(int(saved_state(workdir, 4)["step"]), 4)


def _nan_at(bad_index):
  """Wraps the in-memory source's device input to put a NaN into the images of batch
  `bad_index` (its uint8 images hold none), inside the step."""
  real = input_pipeline.Dataset.device_input

  def device_input(dataset, sharding, **kwargs):
    made = real(dataset, sharding, **kwargs)

    def poisoned(held, rows, step):
      images = made.train(held, rows, step)
      nan_here = jnp.where(step == bad_index, jnp.nan, 0.0).astype(images.dtype)
      return images.at[0, 0, 0, 0].add(nan_here, out_sharding=jax.typeof(images).sharding)

    return dataclasses.replace(made, train=poisoned)

  return mock.patch.object(input_pipeline.Dataset, "device_input", device_input)


class NonFiniteTest(absltest.TestCase):

  def test_nan_at_step_k_stops_there_and_keeps_the_last_good_checkpoint(self):
    with tempfile.TemporaryDirectory() as workdir:
      with _nan_at(4), self.assertRaisesRegex(  # batch 4 is step 5 (steps count from 1).
          faults.NonFiniteStep, r"the training loss became nan at step 5; the last good "
          r"checkpoint \(step 4\) is kept"):
        train.train_config(config_for("data", 2, 1, 8), workdir)
      self.assertEqual(sorted(map(int, os.listdir(os.path.join(workdir, "checkpoints")))),
                       [2, 4])
      self.assertTrue(all(np.isfinite(x).all() for x in
                          jax.tree.leaves(saved_state(workdir, 4)["params"])))

  def test_skipping_leaves_the_parameters_of_a_nan_step_unchanged(self):
    with tempfile.TemporaryDirectory() as workdir:
      with _nan_at(4):
        train.train_config(config_for("data", 2, 1, 6, checkpoint_every_steps=1,
                                      skip_nonfinite_steps=True), workdir)
      before, after, later = (saved_state(workdir, s) for s in (4, 5, 6))
    self.assertEqual(int(after["step"]), 5)  # the step still counts: batch 5 comes next.
    jax.tree.map(np.testing.assert_array_equal, after["params"], before["params"])
    jax.tree.map(np.testing.assert_array_equal, after["opt_state"], before["opt_state"])
    self.assertFalse(all(np.array_equal(a, b) for a, b in
                         zip(jax.tree.leaves(later["params"]), jax.tree.leaves(after["params"]))))


class ChanceWatchTest(absltest.TestCase):

  def test_a_loss_at_chance_after_warmup_is_said_once(self):
    watch = faults.ChanceWatch(10, warmup_steps=20)
    chance = float(np.log(10))
    with self.assertLogs(level="WARNING") as logs:
      said = [watch.observe(step, chance, 0.08) for step in (10, 20)]  # warmup: never.
      said += [watch.observe(30, chance, 0.08), watch.observe(40, 1.5, 0.08)]  # a break.
      said += [watch.observe(step, chance * 1.01, 0.08) for step in (50, 60, 70, 80)]
      logging.warning("end")
    self.assertEqual(said, [False, False, False, False, False, False, True, False])
    warnings = [line for line in logs.output if "chance level" in line]
    self.assertLen(warnings, 1)
    self.assertIn("at step 70, chance level (ln 10 = 2.3026) for 3 logged rows after warmup, at "
                  "learning rate 0.08", warnings[0])

  def test_a_loss_that_never_left_chance_is_said_only_after_a_longer_wait(self):
    watch = faults.ChanceWatch(10, warmup_steps=0, rows=3, rows_from_start=10)
    chance = float(np.log(10))
    with self.assertLogs(level="WARNING") as logs:
      said = [watch.observe(step, chance, 0.01) for step in range(5, 55, 5)]  # 10 rows.
    self.assertEqual(said, [False] * 9 + [True])
    self.assertIn("at step 50, chance level (ln 10 = 2.3026) for 10 logged rows", logs.output[0])


class CorruptCheckpointTest(absltest.TestCase):
  META = {"model": "m", "dataset": "d", "seed": 0, "global_batch_size": 8, "optimizer": "sgd",
          "state_kind": "synchronous"}

  def _write(self, directory, steps):
    checkpointer = checkpointing.Checkpointer(directory, 1, 5, self.META)
    for step in steps:
      checkpointer.save(step, {"w": jnp.full((64, 64), float(step))})
    checkpointer.close()
    target = {"w": jax.ShapeDtypeStruct((64, 64), jnp.float32)}
    return checkpointing.Checkpointer(directory, 1, 5, self.META), target

  def _truncate(self, directory, step):
    for root, _, files in os.walk(os.path.join(directory, str(step), "state")):
      for name in files:
        path = os.path.join(root, name)
        os.truncate(path, os.path.getsize(path) // 2)

  def test_truncated_latest_falls_back_to_the_previous_one(self):
    with tempfile.TemporaryDirectory() as directory:
      checkpointer, target = self._write(directory, (1, 2))
      self._truncate(directory, 2)
      with self.assertLogs(level="WARNING") as logs:
        restored = checkpointer.restore_latest(target)
      self.assertEqual(restored.step, 1)
      np.testing.assert_array_equal(restored.state["w"], 1.0)
      self.assertIn("checkpoint at step 2 is unreadable", "\n".join(logs.output))

  def test_no_readable_checkpoint_is_one_clear_error(self):
    with tempfile.TemporaryDirectory() as directory:
      checkpointer, target = self._write(directory, (1, 2))
      self._truncate(directory, 1)
      self._truncate(directory, 2)
      with self.assertRaisesRegex(UserError, "no checkpoint in .* can be read \\(steps 2, 1\\)"):
        checkpointer.restore_latest(target)


class ReplicatedWriteTest(absltest.TestCase):

  def test_replicated_arrays_are_written_whole_without_slice_programs(self):
    # orbax's replica-parallel writing would compile one slice program per array shape here;
    # on CPU devices (one host's memory) the checkpointer writes each replicated array whole.
    mesh = jax.make_mesh((4,), ("data",), devices=jax.devices()[:4])
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    state = {f"w{n}": jax.device_put(jnp.arange(n * 8, dtype=jnp.float32), replicated)
             for n in (3, 5, 7)}
    with tempfile.TemporaryDirectory() as directory:
      with jax.log_compiles(True), self.assertLogs(level="WARNING") as logs:
        checkpointer = checkpointing.Checkpointer(directory, 1, 1, {})
        checkpointer.save(1, state)
        checkpointer.close()
        logging.warning("end")
      restored = checkpointing.read_numpy(directory, 1)
    # A slice program compiled, or read back from the suite's compilation cache.
    self.assertEqual([line for line in logs.output if re.search(r"jit[(_]slice\b", line)], [])
    for name, array in state.items():
      np.testing.assert_array_equal(restored[name], np.asarray(array))


if __name__ == "__main__":
  absltest.main()
