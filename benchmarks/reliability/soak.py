r"""A run killed again and again, restarted each time, must end exactly where an uninterrupted one
ends: the soak test of checkpoints, resumption and the metrics record.

  python -m benchmarks.reliability.soak [--kills=6] [--seed=0] [--steps=60]

Trains configs/hybrid4.py (2 × 2, alexnet_tiny) on digits for --steps steps, checkpointing every
5. First uninterrupted; then in another workdir the same command is SIGKILLed --kills times, at
moments drawn from --seed — a random time into the run, or the instant a checkpoint save is in
flight (orbax's temporary directory exists) — and restarted after each kill; then stopped once
with SIGTERM and once with SIGINT (Ctrl-C) and restarted after each; then run to the end.

Checks, and exits 1 if any fails: the final parameters and optimiser state are bitwise equal to
the uninterrupted run's; every checkpoint left on disk is readable; metrics.jsonl and TensorBoard
hold every logged step once. Prints one JSON object: kills survived, restarts, wall time of each
run and the time lost to interruptions; writes soak.json under runs/soak/ (or --out; with
--publish into docs/, which docs/faults.md's table is made from).
"""

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np
from absl import app, flags

import benchmarks
from hybrid_parallel import checkpointing, platforms

ROOT = benchmarks.ROOT
_KILLS = flags.DEFINE_integer("kills", 6, "SIGKILLs before the SIGTERM and the SIGINT.")
_SEED = flags.DEFINE_integer("seed", 0, "Draws the kill moments.")
_STEPS = flags.DEFINE_integer("steps", 60, "Training steps of the run.")
_OUTPUT = benchmarks.define_output_flags("soak")
ARGS = ["--config=configs/hybrid4.py", "--config.model=alexnet_tiny",
        "--config.global_batch_size=64", "--config.eval_every_steps=100000",
        "--config.checkpoint_every_steps=5", "--config.log_every_steps=1"]


def _start(workdir: str, steps: int) -> subprocess.Popen:
  return subprocess.Popen([sys.executable, "main.py", *ARGS, f"--config.num_train_steps={steps}",
                           f"--workdir={workdir}"], cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)


def _checkpoint_dir(workdir: str) -> str:
  return os.path.join(workdir, "checkpoints")


def _saving(workdir: str) -> bool:
  """Whether orbax is writing a checkpoint (its temporary directory exists)."""
  directory = _checkpoint_dir(workdir)
  return os.path.isdir(directory) and any(".orbax-checkpoint-tmp" in name
                                          for name in os.listdir(directory))


def _steps_logged(workdir: str) -> list[int]:
  path = os.path.join(workdir, "metrics.jsonl")
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line)["step"] for line in f if "train_loss" in line]


def _wait(predicate, process, timeout_s: float = 300) -> bool:
  """Waits for `predicate` while `process` runs; False if the process ended first."""
  deadline = time.monotonic() + timeout_s
  while not predicate():
    if process.poll() is not None:
      return False
    if time.monotonic() > deadline:
      raise TimeoutError("the run made no progress")
    time.sleep(0.01)
  return True


def interrupted_run(workdir: str, *, steps: int, kills: int, rng: random.Random) -> dict:
  """Kills and restarts the run as the module docstring says; its log of what happened."""
  events = []
  start = time.perf_counter()
  for i in range(kills):
    process = _start(workdir, steps)
    during_save = i % 2 == 1  # every other kill lands in a checkpoint save.
    if during_save:
      landed = _wait(lambda: _saving(workdir), process)
    else:
      logged = len(_steps_logged(workdir))
      target = logged + rng.randint(1, steps // (kills + 2))
      landed = _wait(lambda: len(_steps_logged(workdir)) >= target, process)
    process.kill()
    process.communicate()
    events.append({"signal": "SIGKILL", "during_save": during_save, "landed": landed,
                   "steps_logged": max(_steps_logged(workdir), default=0)})
    print(json.dumps(events[-1]), file=sys.stderr, flush=True)
  for signum in (signal.SIGTERM, signal.SIGINT):
    process = _start(workdir, steps)
    logged = len(_steps_logged(workdir))
    _wait(lambda: len(_steps_logged(workdir)) >= logged + 3, process)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    events.append({"signal": signal.Signals(signum).name, "exit": process.returncode,
                   "said_saved": "saved the checkpoint at step" in stderr})
    print(json.dumps(events[-1]), file=sys.stderr, flush=True)
  final = _start(workdir, steps)
  _, stderr = final.communicate(timeout=600)
  if final.returncode != 0:
    raise RuntimeError(f"the last restart failed: {stderr[-2000:]}")
  return {"events": events, "wall_clock_s": round(time.perf_counter() - start, 1)}


def main(argv):
  del argv
  benchmarks.require_extra("test", ["tensorboard"])  # reads the runs' TensorBoard events back.
  platforms.start()  # before anything queries the devices.

  rng = random.Random(_SEED.value)
  steps = _STEPS.value
  with tempfile.TemporaryDirectory() as straight, tempfile.TemporaryDirectory() as killed:
    start = time.perf_counter()
    process = _start(straight, steps)
    _, stderr = process.communicate(timeout=600)
    if process.returncode != 0:
      raise SystemExit(f"error: the uninterrupted run failed: {stderr[-2000:]}")
    straight_s = time.perf_counter() - start
    interrupted = interrupted_run(killed, steps=steps, kills=_KILLS.value, rng=rng)

    directory = _checkpoint_dir(killed)
    kept = sorted(int(d) for d in os.listdir(directory) if d.isdigit())
    readable = [step for step in kept if checkpointing.read_numpy(directory, step) is not None]
    got = checkpointing.read_numpy(directory, steps)
    want = checkpointing.read_numpy(_checkpoint_dir(straight), steps)
    bitwise = all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(got),
                                                       jax.tree.leaves(want), strict=True))
    logged = _steps_logged(killed)
    from tensorboard.backend.event_processing import event_accumulator  # the test extra.
    events = event_accumulator.EventAccumulator(killed)
    events.Reload()
    tensorboard_steps = [e.step for e in events.Scalars("train_loss")]
  result = {
      "config": "hybrid4 (2×2, alexnet_tiny, batch 64)", "steps": steps, "seed": _SEED.value,
      "sigkills": sum(e["signal"] == "SIGKILL" for e in interrupted["events"]),
      "sigkills_during_a_save": sum(e.get("during_save", False) and e["landed"]
                                    for e in interrupted["events"]),
      "restarts": len(interrupted["events"]), "events": interrupted["events"],
      "uninterrupted_s": round(straight_s, 1), "interrupted_s": interrupted["wall_clock_s"],
      "time_lost_s": round(interrupted["wall_clock_s"] - straight_s, 1),
      "final_state_bitwise_equal": bitwise,
      "checkpoints_readable": f"{len(readable)} of {len(kept)}",
      "metrics_each_step_once": logged == list(range(1, steps + 1)),
      "tensorboard_each_step_once": tensorboard_steps == list(range(1, steps + 1)),
      "date": time.strftime("%Y-%m-%d"),
  }
  print(json.dumps(result))
  benchmarks.publish(result, _OUTPUT.path("soak.json"))
  if not (bitwise and result["metrics_each_step_once"] and result["tensorboard_each_step_once"]
          and len(readable) == len(kept)):
    raise SystemExit("error: the interrupted run did not end as the uninterrupted one.")


if __name__ == "__main__":
  app.run(main)
