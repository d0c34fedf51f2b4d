"""The real training loop on digits: accuracy reached, metrics and TensorBoard events written."""

import json
import os
import subprocess
import sys
import tempfile

from absl.testing import absltest
from tensorboard.backend.event_processing import event_accumulator

import train
from tests import testing

# alexnet_tiny learns digits in 16 epochs at this learning rate (about 15 s on 2 cores). Over 352
# steps float rounding grows chaotically, so the final accuracy is a draw from a spread that the
# seed and the CPU's instruction set both pick from. Measured (2026-11-24; single and hybrid 2×2,
# seeds 0–5, each under one or two of AVX-512, AVX2 and SSE4.2 code): with dropout 0.25, 18 runs
# gave 0.900–0.978 (median 0.965); with the papers' 0.5, 8 runs gave 0.839–0.939 (FC layers of 64
# units lose too much to it). Hence dropout 0.25 here, and "learned" means at least 0.80: a tenth below
# the worst run seen (chance is 0.10). That both schemes compute the same SGD is step_test's.
CONFIG = dict(global_batch_size=64, eval_batch_size=120, num_epochs=16, base_learning_rate=0.1,
              lr_decay_epochs=(10,), log_every_steps=50, eval_every_steps=100, dropout_rate=0.25)
LEARNED = 0.80
TOTAL_STEPS = 16 * (1437 // 64)  # 352
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TrainTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.workdir = tempfile.mkdtemp()
    # The single-device run, as a user starts it, beside the hybrid run in this process: one
    # device's program leaves the second core idle.
    cls.single_workdir = tempfile.mkdtemp()
    overrides = [f"--config.{k}={v}" for k, v in CONFIG.items()]
    single = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "main.py"), f"--config={ROOT}/configs/single.py",
         "--config.model=alexnet_tiny", *overrides, f"--workdir={cls.single_workdir}"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    cls.hybrid = train.train_config(
        testing.tiny_config(parallelism="hybrid", mesh=dict(data=2, model=2), **CONFIG),
        cls.workdir)
    _, cls.single_stderr = single.communicate(timeout=600)
    cls.single_returncode = single.returncode

  def test_hybrid_learns_digits(self):
    self.assertGreaterEqual(self.hybrid["eval_top1"], LEARNED)
    self.assertGreaterEqual(self.hybrid["eval_top5"], self.hybrid["eval_top1"])

  def test_single_device_learns_digits_too(self):
    self.assertEqual(self.single_returncode, 0, self.single_stderr[-3000:])
    with open(os.path.join(self.single_workdir, "metrics.jsonl")) as f:
      single = [json.loads(line) for line in f][-1]
    self.assertEqual(single["step"], TOTAL_STEPS)
    self.assertGreaterEqual(single["eval_top1"], LEARNED)

  def test_metrics_jsonl_rows(self):
    with open(os.path.join(self.workdir, "metrics.jsonl")) as f:
      rows = [json.loads(line) for line in f]
    train_rows = [r for r in rows if "train_loss" in r]
    eval_rows = [r for r in rows if "eval_loss" in r]
    self.assertEqual([r["step"] for r in train_rows], [50, 100, 150, 200, 250, 300, 350,
                                                     TOTAL_STEPS])
    self.assertEqual([r["step"] for r in eval_rows], [100, 200, 300, TOTAL_STEPS])
    self.assertEqual(set(train_rows[0]), {"step", "train_loss", "train_accuracy", "learning_rate",
                                          "images_per_sec", "nonfinite_grads"})
    self.assertEqual(set(eval_rows[0]), {"step", "eval_loss", "eval_top1", "eval_top5"})
    self.assertAlmostEqual(train_rows[0]["learning_rate"], 0.1 * 64 / 128)
    self.assertAlmostEqual(train_rows[-1]["learning_rate"], 0.1 * 64 / 128 * 0.1)
    self.assertLess(train_rows[-1]["train_loss"], train_rows[0]["train_loss"])
    self.assertAlmostEqual(eval_rows[-1]["eval_top1"], self.hybrid["eval_top1"])

  def test_tensorboard_events(self):
    events = event_accumulator.EventAccumulator(self.workdir)
    events.Reload()
    self.assertContainsSubset({"train_loss", "eval_top1", "images_per_sec"},
                              events.Tags()["scalars"])
    top1 = events.Scalars("eval_top1")
    self.assertEqual(top1[-1].step, TOTAL_STEPS)
    self.assertAlmostEqual(top1[-1].value, self.hybrid["eval_top1"], places=5)


if __name__ == "__main__":
  absltest.main()
