"""main.py under faults, as separate processes: SIGKILL + restart, SIGTERM and Ctrl-C, a failing
checkpoint save, many processes with a peer that dies or hangs."""

import concurrent.futures
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np
from absl.testing import absltest, parameterized
from tensorboard.backend.event_processing import event_accumulator

import experiment
import train
from configs import hybrid4
from hybrid_parallel import checkpointing
from hybrid_parallel.errors import UserError
from tests import numerics, testing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# configs/hybrid4.py with these fields, for every run here. A batch of 16 (4 images a device):
# what these tests ask of a run (its signals, saves, restarts, processes) does not depend on the
# batch, and a step of 16 costs a quarter of one of 64.
TINY_FIELDS = {"model": "alexnet_tiny", "global_batch_size": 16, "eval_every_steps": 100000}


def config_flags(fields: dict) -> list[str]:
  return [f"--config.{k}={v}" for k, v in fields.items()]


TINY = ["--config=configs/hybrid4.py", *config_flags(TINY_FIELDS)]


def command(workdir, *args):
  return [sys.executable, os.path.join(ROOT, "main.py"), *TINY, f"--workdir={workdir}", *args]


def start(workdir, *args, stderr=subprocess.PIPE):
  return subprocess.Popen(command(workdir, *args), cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=stderr, text=True)


def finish(*processes) -> list[str]:
  """Waits for processes started by `start`; each must exit 0. Returns their stderr."""
  errors = []
  for process in processes:
    _, stderr = process.communicate(timeout=300)
    if process.returncode != 0:
      raise AssertionError(f"main.py failed:\n{why_it_ended(stderr)}")
    errors.append(stderr)
  return errors


def checkpoints(workdir):
  """Committed checkpoint steps (orbax renames a finished save to its step number)."""
  directory = os.path.join(workdir, "checkpoints")
  return sorted(int(d) for d in os.listdir(directory) if d.isdigit()) if os.path.isdir(
      directory) else []


def why_it_ended(stderr: str) -> str:
  """What a failed main.py's stderr says: its error and fatal log lines (a process aborted by
  JAX's distributed runtime prints the reason once, then every thread's stack), then its tail."""
  said = [line for line in stderr.splitlines()
          if re.match(r"(error: |[FE]\d{4} |Fatal Python error|.*Check failed)", line)]
  return "\n".join(said[:10] + ["...", stderr[-2000:]])


def wait_for(predicate, timeout_s=240, processes=()):
  """Waits until `predicate()`; fails at the timeout, or at once if one of `processes` ends
  first, saying why each that ended did (a job's process may end because its peer did)."""
  deadline = time.monotonic() + timeout_s
  while not predicate():
    ended = [(i, p) for i, p in enumerate(processes) if p.poll() is not None]
    if ended:
      raise AssertionError("\n".join(
          f"main.py (process {i}) ended first (exit {p.returncode}):\n" +
          (why_it_ended(p.stderr.read()) if p.stderr else "(stderr in a file)")
          for i, p in ended) + "".join(f"\n(process {i} still running)"
                                       for i, p in enumerate(processes) if p.poll() is None))
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
  """Leaves of nested dicts / lists in key order (of the numpy trees `saved_state` reads)."""
  if isinstance(tree, dict):
    return [leaf for key in sorted(tree) for leaf in tree_leaves(tree[key])]
  if isinstance(tree, (list, tuple)):
    return [leaf for item in tree for leaf in tree_leaves(item)]
  return [tree]


def files(workdir):
  return sorted(os.path.join(root, name) for root, _, names in os.walk(workdir) for name in names)


def scalars(workdir, tag):
  """(step, value) of a TensorBoard scalar, as TensorBoard reads it (purged events dropped)."""
  events = event_accumulator.EventAccumulator(workdir)
  events.Reload()
  return [(e.step, e.value) for e in events.Scalars(tag)]


def ended(process) -> concurrent.futures.Future:
  """(stderr, when it ended) of `process`, read in a thread: several processes can then be waited
  for at once, each one's end timed as it happens."""

  def wait():
    _, stderr = process.communicate()
    return stderr, time.monotonic()

  pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
  future = pool.submit(wait)
  pool.shutdown(wait=False)
  return future


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def rows(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f]


class PreemptionTest(absltest.TestCase):
  STEPS = ["--config.num_train_steps=40", "--config.checkpoint_every_steps=10",
           "--config.log_every_steps=2"]

  def test_sigkill_and_restart_end_bitwise_equal_to_an_uninterrupted_run(self):
    with tempfile.TemporaryDirectory() as straight, tempfile.TemporaryDirectory() as killed:
      process = start(killed, *self.STEPS)
      # The uninterrupted run starts once the killed one has trained a step, and runs beside it:
      # the killed one has compiled the programs by then, and the uninterrupted one reads them
      # from the suite's compilation cache instead of compiling them a second time at once.
      wait_for(lambda: os.path.exists(os.path.join(killed, "metrics.jsonl")) and losses(killed),
               processes=[process])
      uninterrupted = start(straight, *self.STEPS)
      # Killed once it has logged steps past its last checkpoint: the restart repeats them.
      wait_for(lambda: checkpoints(killed) and losses(killed) and
               max(losses(killed)) > max(checkpoints(killed)), processes=[process])
      process.kill()
      process.wait()
      self.assertEqual(process.returncode, -signal.SIGKILL)
      self.assertNotIn(40, checkpoints(killed))  # it really died mid-run.
      restarted, _ = finish(start(killed, *self.STEPS), uninterrupted)
      self.assertRegex(restarted, r"resumed from the checkpoint at step [123]0")
      got, expected = saved_state(killed, 40), saved_state(straight, 40)
      killed_rows, straight_rows = rows(killed), rows(straight)
      killed_events, straight_events = scalars(killed, "train_loss"), scalars(straight,
                                                                             "train_loss")
      # Started again, the finished run trains nothing and changes nothing.
      before = {path: open(path, "rb").read() for path in files(straight)}
      again, = finish(start(straight, *self.STEPS))
      after = {path: open(path, "rb").read() for path in files(straight)}
    self.assertEqual(int(got["step"]), 40)
    for a, b in zip(tree_leaves(got), tree_leaves(expected), strict=True):
      np.testing.assert_array_equal(a, b)
    # Each step once in metrics.jsonl and in TensorBoard, with the uninterrupted run's losses.
    train_steps = list(range(2, 41, 2))
    self.assertEqual([r["step"] for r in killed_rows if "train_loss" in r], train_steps)
    self.assertEqual([r["step"] for r in killed_rows if "eval_loss" in r], [40])
    self.assertEqual([r["train_loss"] for r in killed_rows if "train_loss" in r],
                     [r["train_loss"] for r in straight_rows if "train_loss" in r])
    self.assertEqual([step for step, _ in killed_events], train_steps)
    self.assertEqual(killed_events, straight_events)
    self.assertIn("is finished (its checkpoint is at step 40 of 40); nothing to train. Its "
                  "final evaluation: loss ", again)
    self.assertEqual(after, before)

  def test_sigterm_and_sigint_save_at_the_step_they_arrived(self):
    long_run = ["--config.num_train_steps=100000", "--config.checkpoint_every_steps=5",
                "--config.log_every_steps=1000"]
    with tempfile.TemporaryDirectory() as term, tempfile.TemporaryDirectory() as interrupt, \
        tempfile.TemporaryDirectory() as twice:
      # stderr into files: three processes' pipes are not read while the test waits for each.
      logs = {workdir: open(os.path.join(workdir, "stderr.txt"), "w+")
              for workdir in (term, interrupt, twice)}
      processes = {workdir: start(workdir, *long_run, stderr=log) for workdir, log in logs.items()}
      self.addCleanup(lambda: [p.kill() for p in processes.values() if p.poll() is None])
      # Any checkpoint: at ~20 steps/s the one at step 5 may already be pruned (max_to_keep).
      for workdir, process in processes.items():
        wait_for(lambda workdir=workdir: checkpoints(workdir), processes=[process])
      processes[term].send_signal(signal.SIGTERM)
      processes[interrupt].send_signal(signal.SIGINT)
      # A second signal while the first is served (Ctrl-C twice): out at once, nothing saved.
      # Sent after the first was seen taken, it raced the save of a tiny model (which can end
      # first on a fast machine); sent to a stopped process, SIGINT and SIGTERM both wait and are
      # taken in that order when it continues (two pending signals of one kind would be one).
      processes[twice].send_signal(signal.SIGSTOP)
      processes[twice].send_signal(signal.SIGINT)
      processes[twice].send_signal(signal.SIGTERM)
      processes[twice].send_signal(signal.SIGCONT)
      for process in processes.values():
        process.wait(timeout=120)
      stderr = {workdir: open(log.name).read() for workdir, log in logs.items()}
      for workdir, signum, code in ((term, signal.SIGTERM, 0), (interrupt, signal.SIGINT, 130)):
        self.assertEqual(processes[workdir].returncode, code, stderr[workdir][-2000:])
        name = signal.Signals(signum).name
        step = int(stderr[workdir].split(f"{name}: saved the checkpoint at step ")[1]
                   .split(";")[0])
        self.assertEqual(checkpoints(workdir)[-1], step)
        self.assertEqual(int(saved_state(workdir, step)["step"]), step)
        self.assertEqual(max(losses(workdir)), step)  # the last metrics row is that step's.
        self.assertNotIn("Traceback", stderr[workdir])
      self.assertEqual(processes[twice].returncode, 128 + signal.SIGTERM)
      self.assertIn("SIGINT: finishing the step in flight", stderr[twice])
      self.assertIn("error: a second SIGTERM arrived; exiting now without saving.", stderr[twice])
      self.assertNotIn("saved the checkpoint", stderr[twice])
      self.assertNotIn("Traceback", stderr[twice])


class CheckpointWriteTest(absltest.TestCase):

  def test_a_save_that_fails_is_one_sentence_and_the_last_checkpoint_stays(self):
    with tempfile.TemporaryDirectory() as workdir:
      process = start(workdir, "--config.num_train_steps=100000",
                      "--config.checkpoint_every_steps=5", "--config.log_every_steps=5")
      wait_for(lambda: checkpoints(workdir))
      # From now on no file of this process may grow past 64 KB, as on a full disk: the state's
      # arrays no longer fit, the metrics and events do.
      resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
      _, stderr = process.communicate(timeout=120)
      self.assertEqual(process.returncode, 1, stderr[-2000:])
      self.assertNotIn("Traceback", stderr)
      errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
      self.assertLen(errors, 1)
      latest = checkpoints(workdir)[-1]
      self.assertRegex(errors[0], rf"error: the checkpoint at step \d+ could not be written to "
                                  rf".*; the checkpoint at step {latest} is still the latest\.")
      self.assertEqual(int(saved_state(workdir, latest)["step"]), latest)  # readable.
      self.assertGreaterEqual(max(losses(workdir)), latest)  # what was logged is kept.


class MultiProcessTest(absltest.TestCase):

  def _two_processes(self, workdir, *args):
    port = free_port()
    return [start(workdir, *args, f"--coordinator_address=127.0.0.1:{port}", "--num_processes=2",
                  f"--process_id={i}") for i in range(2)]

  def _training_two_processes(self, workdir, *, step_timeout_s, heartbeat_timeout_s):
    """Starts two processes of a long run; `_wait_until_trained` waits for their first step."""
    processes = self._two_processes(workdir, "--config.num_train_steps=100000",
                                    "--config.log_every_steps=5",
                                    f"--config.step_timeout_s={step_timeout_s}",
                                    f"--heartbeat_timeout_s={heartbeat_timeout_s}")
    self.addCleanup(lambda: [p.kill() for p in processes if p.poll() is None])
    return processes

  @staticmethod
  def _wait_until_trained(workdir, processes):
    """Waits until the run in `workdir` has logged a step. A step timeout shorter than a step
    under load ends the run before it logs (seen at 6 s): the wait then fails at once with the
    stderr of each process that ended."""
    wait_for(lambda: os.path.exists(os.path.join(workdir, "metrics.jsonl")) and losses(workdir),
             processes=processes)

  def _assert_two_processes_train_like_one(self, fields, *, then):
    """Runs main.py with the config `fields` in two processes and, meanwhile, the same config in
    this one (what main.py runs, less the process start: train.train_config); the two log
    steps 1-4 with the one's losses. `then(workdir of the two)` checks the rest while the
    workdirs exist."""
    config = hybrid4.get_config()
    config.update_from_flattened_dict({**TINY_FIELDS, **fields})
    with (tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two,
          tempfile.TemporaryDirectory() as exact):
      processes = self._two_processes(two, *config_flags(fields))
      self.addCleanup(lambda: [p.kill() for p in processes if p.poll() is None])
      train.train_config(config, one)
      config.dtype = "float64"  # the same run's exact losses (tests/numerics.py).
      with jax.enable_x64(True):
        train.train_config(config, exact)
      finish(*processes)
      self.assertEqual(sorted(losses(two)), [1, 2, 3, 4])
      numerics.assert_as_accurate(*(list(losses(w).values()) for w in (two, one, exact)))
      then(two)

  @testing.needs_tensorflow
  def test_two_processes_read_their_own_tfds_shards_and_train_like_one(self):
    # hybrid 2×2 (the default of these runs: the data axis across the processes, the model axis
    # within each) fed by tfds, four input shards, two per process; checkpoints written
    # collectively, readable by one.
    from tests import tfds_testing  # TensorFlow loads only for this test.
    self._assert_two_processes_train_like_one(
        {"num_train_steps": 4, "log_every_steps": 1, "dataset": "mnist",
         "data_dir": tfds_testing.prepared_mnist_dir(), "tfds_download": False,
         "input_shards": 4, "global_batch_size": 8, "eval_batch_size": 8,
         "checkpoint_every_steps": 2},
        then=lambda two: (self.assertEqual(checkpoints(two), [2, 4]),
                          # 4 steps × 2 rows of each shard.
                          self.assertEqual(data_position(two, 4), [8, 8, 8, 8])))

  def test_a_decoded_set_split_over_processes_trains_like_one(self):
    # hybrid 2×2 with the data axis across the processes, a decoded set of real JPEGs split over
    # it: each process places its devices' share, and the step's all-to-all carries each row to
    # the process whose batch holds it.
    from tests import decoded_input_test
    with tempfile.TemporaryDirectory() as tmp:
      _, yuv = decoded_input_test.model_sized_sets(tmp, jpeg=False)
      self._assert_two_processes_train_like_one(
          {"num_train_steps": 4, "log_every_steps": 1, "dataset": f"decoded:{yuv}",
           "decoded_placement": "split", "global_batch_size": 8, "eval_batch_size": 6},
          then=lambda two: None)

  def test_a_dead_or_hung_process_ends_the_other_with_a_message(self):
    # Two jobs side by side: in one a process dies, in the other one hangs (their waits overlap).
    with tempfile.TemporaryDirectory() as dead, tempfile.TemporaryDirectory() as hung:
      # The step watchdog fires before jax.distributed's heartbeat: a collective that does not
      # fail at once (seen under load) is then ended by the watchdog's sentence, not by the
      # heartbeat's fatal log (which would end it with JAX's own stack dump instead).
      dying = self._training_two_processes(dead, step_timeout_s=20, heartbeat_timeout_s=60)
      # Each is stopped once both its processes train (a logged step): not while they compile,
      # when JAX's coordination service, not a failed collective, is what notices.
      self._wait_until_trained(dead, dying)
      # The hung job starts once the dying one trains: it runs the same programs, and reads them
      # from the suite's compilation cache rather than compiling them beside it.
      # The heartbeat outlasts the step timeout: the watchdog, not jax.distributed, must notice.
      hanging = self._training_two_processes(hung, step_timeout_s=10, heartbeat_timeout_s=300)
      dying[1].kill()
      killed_at = time.monotonic()
      dying_end = ended(dying[0])
      self._wait_until_trained(hung, hanging)
      hanging[1].send_signal(signal.SIGSTOP)  # hung, not dead: its sockets stay open.
      stopped_at = time.monotonic()
      try:
        hung_stderr, hung_at = ended(hanging[0]).result(timeout=120)
      finally:
        hanging[1].kill()
        hanging[1].communicate()
      dead_stderr, dead_at = dying_end.result(timeout=120)
      dying[1].communicate()
    self.assertNotEqual(dying[0].returncode, 0)
    self.assertLess(dead_at - killed_at, 90)
    self.assertRegex(dead_stderr, r"error: (process 0 of 2: a collective with the other "
                                  r"processes failed \(.*\)|no training step finished in 20 s); "
                                  r"another (process|of the 2 processes) has probably died")
    self.assertEqual(hanging[0].returncode, 1)
    # After the stop, within the timeout (counted from the last step, which may have been
    # slow under load: no lower bound but the stop), a check period and the exit.
    self.assertBetween(hung_at - stopped_at, 0, 10 + 15)
    self.assertIn("error: no training step finished in 10 s; another of the 2 processes has "
                  "probably died or hung (this is process 0).", hung_stderr)


def slurm_port() -> int:
  """A free port that jax.distributed's SLURM detection will pick: 61440 + job id mod 4096."""
  for port in range(61440 + os.getpid() % 4096, 61440 + 4096):
    with socket.socket() as s:
      try:
        s.bind(("127.0.0.1", port))
      except OSError:
        continue
      return port
  raise AssertionError("no free port in 61440-65535")


class DistributedResolveTest(parameterized.TestCase):
  """`--distributed` learns the process count from the environment (here SLURM's variables, as
  a `srun` of two tasks on this host sets them): the checks that need it run once it is known."""

  @parameterized.named_parameters(
      ("mesh", ["--config.parallelism=single", "--config.mesh.data=1", "--config.mesh.model=1"],
       "the 1×1 mesh cannot be split evenly over 2 processes."),
      ("pmap", ["--config.parallelism=data", "--config.mesh.data=2", "--config.mesh.model=1",
                "--config.backend=pmap"], "backend 'pmap' runs in one process here"),
      ("input_shards", ["--config.dataset=cifar10", "--config.input_shards=3",
                        "--config.global_batch_size=96", "--config.eval_batch_size=96"],
       "input_shards 3 cannot be split evenly over 2 processes; use a multiple of 2."))
  def test_each_check_fires_for_the_real_process_count(self, args, message):
    port = slurm_port()
    with tempfile.TemporaryDirectory() as workdir:
      processes = [
          subprocess.Popen(command(workdir, *args, "--distributed"), cwd=ROOT, text=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           env={**os.environ, "SLURM_JOB_ID": str(port - 61440),
                                "SLURM_STEP_NODELIST": "localhost", "SLURM_NTASKS": "2",
                                "SLURM_PROCID": str(i), "SLURM_LOCALID": str(i)})
          for i in range(2)]
      self.addCleanup(lambda: [p.kill() for p in processes if p.poll() is None])
      for i, process in enumerate(processes):
        _, stderr = process.communicate(timeout=120)
        self.assertEqual(process.returncode, 1, stderr[-2000:])
        errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
        self.assertLen(errors, 1, stderr[-2000:])
        self.assertTrue(errors[0].startswith(f"error: process {i} of 2: "), errors[0])
        self.assertIn(message, errors[0])
        self.assertNotIn("Traceback", stderr)
      self.assertEqual(os.listdir(workdir), [])  # refused before anything was written.

  def test_a_run_resolved_for_another_process_count_is_refused(self):
    config = hybrid4.get_config()
    config.update_from_flattened_dict(TINY_FIELDS)
    spec = experiment.resolve(config, processes=2)  # this job has one.
    with tempfile.TemporaryDirectory() as workdir:
      with self.assertRaisesRegex(UserError, r"^the run was resolved for 2 process\(es\) but "
                                             r"this job has 1; resolve it with "
                                             r"processes=jax.process_count\(\)\.$"):
        train.train_and_evaluate(spec, workdir)
      self.assertEqual(os.listdir(workdir), [])


if __name__ == "__main__":
  absltest.main()
