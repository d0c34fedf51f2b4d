"""main.py under faults, as separate processes: SIGKILL + restart, SIGTERM, many processes."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
from absl.testing import absltest

from hybrid_parallel import checkpointing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--config=configs/hybrid4.py", "--config.model=alexnet_tiny",
        "--config.global_batch_size=64", "--config.eval_every_steps=100000"]


def command(workdir, *args):
  return [sys.executable, os.path.join(ROOT, "main.py"), *TINY, f"--workdir={workdir}", *args]


def start(workdir, *args):
  return subprocess.Popen(command(workdir, *args), cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)


def run(workdir, *args):
  result = subprocess.run(command(workdir, *args), cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
  if result.returncode != 0:
    raise AssertionError(f"main.py failed:\n{result.stderr[-3000:]}")
  return result


def checkpoints(workdir):
  """Committed checkpoint steps (orbax renames a finished save to its step number)."""
  directory = os.path.join(workdir, "checkpoints")
  return sorted(int(d) for d in os.listdir(directory) if d.isdigit()) if os.path.isdir(
      directory) else []


def wait_for(predicate, timeout_s=240):
  deadline = time.monotonic() + timeout_s
  while not predicate():
    if time.monotonic() > deadline:
      raise AssertionError("timed out")
    time.sleep(0.05)


def data_position(workdir, step):
  with open(os.path.join(workdir, "checkpoints", str(step), "meta", "metadata")) as f:
    return json.load(f)["data_position"]


def saved_state(workdir, step):
  return checkpointing.read_numpy(os.path.join(workdir, "checkpoints"), step)


def losses(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  return {r["step"]: r["train_loss"] for r in rows if "train_loss" in r}


def tree_leaves(tree):
  """Leaves of nested dicts / lists in key order (numpy only: this process needs no devices)."""
  if isinstance(tree, dict):
    return [leaf for key in sorted(tree) for leaf in tree_leaves(tree[key])]
  if isinstance(tree, (list, tuple)):
    return [leaf for item in tree for leaf in tree_leaves(item)]
  return [tree]


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


class PreemptionTest(absltest.TestCase):
  STEPS = ["--config.num_train_steps=40", "--config.checkpoint_every_steps=5",
           "--config.log_every_steps=5"]

  def test_sigkill_and_restart_end_bitwise_equal_to_an_uninterrupted_run(self):
    with tempfile.TemporaryDirectory() as straight, tempfile.TemporaryDirectory() as killed:
      run(straight, *self.STEPS)
      process = start(killed, *self.STEPS)
      wait_for(lambda: 10 in checkpoints(killed))
      process.kill()
      process.wait()
      self.assertEqual(process.returncode, -signal.SIGKILL)
      self.assertNotIn(40, checkpoints(killed))  # it really died mid-run.
      restarted = run(killed, *self.STEPS)
      self.assertRegex(restarted.stderr, r"resumed from the checkpoint at step (1[05]|2[05]|3[05])")
      got, expected = saved_state(killed, 40), saved_state(straight, 40)
    self.assertEqual(int(got["step"]), 40)
    for a, b in zip(tree_leaves(got), tree_leaves(expected), strict=True):
      np.testing.assert_array_equal(a, b)

  def test_sigterm_saves_at_the_step_it_arrived_and_exits_0(self):
    with tempfile.TemporaryDirectory() as workdir:
      process = start(workdir, "--config.num_train_steps=100000",
                      "--config.checkpoint_every_steps=5", "--config.log_every_steps=1000")
      wait_for(lambda: 5 in checkpoints(workdir))
      process.send_signal(signal.SIGTERM)
      _, stderr = process.communicate(timeout=120)
      self.assertEqual(process.returncode, 0, stderr[-2000:])
      step = int(stderr.split("SIGTERM: saved the checkpoint at step ")[1].split(";")[0])
      self.assertEqual(checkpoints(workdir)[-1], step)
      self.assertEqual(int(saved_state(workdir, step)["step"]), step)
      self.assertEqual(max(losses(workdir)), step)  # the last metrics row is that step's.


class MultiProcessTest(absltest.TestCase):

  def _two_processes(self, workdir, *args):
    port = free_port()
    return [start(workdir, *args, f"--coordinator_address=127.0.0.1:{port}", "--num_processes=2",
                  f"--process_id={i}") for i in range(2)]

  def test_two_processes_train_like_one(self):
    steps = ["--config.num_train_steps=4", "--config.log_every_steps=1",
             "--config.checkpoint_every_steps=2"]
    for mesh in (["--config.parallelism=hybrid"],
                 ["--config.parallelism=data", "--config.mesh.data=4", "--config.mesh.model=1"]):
      with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        run(one, *steps, *mesh)
        processes = self._two_processes(two, *steps, *mesh)
        for p in processes:
          _, stderr = p.communicate(timeout=300)
          self.assertEqual(p.returncode, 0, stderr[-3000:])
        self.assertEqual(sorted(losses(two)), [1, 2, 3, 4])
        np.testing.assert_allclose(list(losses(two).values()), list(losses(one).values()),
                                   rtol=1e-5)
        self.assertEqual(checkpoints(two), [2, 4])  # written collectively, readable by one.

  def test_two_processes_read_their_own_tfds_shards_and_train_like_one(self):
    from tests import tfds_testing  # TensorFlow loads only for this test.
    args = ["--config.num_train_steps=4", "--config.log_every_steps=1", "--config.dataset=mnist",
            f"--config.data_dir={tfds_testing.prepared_mnist_dir()}",
            "--config.tfds_download=False", "--config.input_shards=4",
            "--config.global_batch_size=8", "--config.eval_batch_size=8",
            "--config.checkpoint_every_steps=4"]
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
      run(one, *args)
      processes = self._two_processes(two, *args)
      for p in processes:
        _, stderr = p.communicate(timeout=300)
        self.assertEqual(p.returncode, 0, stderr[-3000:])
      np.testing.assert_allclose(list(losses(two).values()), list(losses(one).values()),
                                 rtol=1e-5)
      self.assertEqual(sorted(losses(two)), [1, 2, 3, 4])
      self.assertEqual(data_position(two, 4), [8, 8, 8, 8])  # 4 steps × 2 rows of each shard

  def test_a_dead_process_ends_the_other_with_a_message(self):
    with tempfile.TemporaryDirectory() as workdir:
      processes = self._two_processes(workdir, "--config.num_train_steps=100000",
                                      "--config.log_every_steps=5", "--config.step_timeout_s=30",
                                      "--heartbeat_timeout_s=10")
      wait_for(lambda: os.path.exists(os.path.join(workdir, "metrics.jsonl")))
      processes[1].kill()
      killed_at = time.monotonic()
      _, stderr = processes[0].communicate(timeout=120)
      self.assertNotEqual(processes[0].returncode, 0)
      self.assertLess(time.monotonic() - killed_at, 90)
      self.assertRegex(stderr, r"error: (process 0 of 2: a collective with the other processes "
                               r"failed \(.*\)|no training step finished in 30 s); another "
                               r"(process|of the 2 processes) has probably died")
      processes[1].communicate()


if __name__ == "__main__":
  absltest.main()
