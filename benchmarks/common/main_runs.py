"""Training runs of main.py from scratch, as a user starts them, for the benchmarks that train.

run_config(NAME, WORKDIRS) runs `python main.py --config=configs/NAME.py` (plus `--config.`
overrides) in its own process, passing its progress lines on as they come, and returns its
wall-clock and final metrics (and, asked, when the
device worked and waited in a few traced steps); metrics_rows reads a run's metrics.jsonl back.
"""

import collections
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

import benchmarks
import configs
from benchmarks.common import trace_stats

ROOT = benchmarks.ROOT


class RunFailed(SystemExit):
  """main.py exited non-zero: a benchmark's main ends with its message; a report that gathers
  several measurements (benchmarks/speed/accelerator.py) records it and goes on."""


def run_config(name: str, workdirs: str, *, overrides: tuple[str, ...] = (),
               run_name: str | None = None, timeout_s: float | None = None,
               profile_steps: int = 0, trace_to: str | None = None) -> dict:
  """Trains configs/NAME.py (with `--config.` overrides) by main.py from scratch in
  workdirs/RUN_NAME; its wall-clock and final metrics. With `profile_steps`, main.py traces
  that many steps after its first (`config.profile_steps`; the median rate leaves out the log
  windows that hold them) and the result's `traced` says when the device worked and waited in
  them (trace_stats.device_timeline); `trace_to` keeps the trace."""
  workdir = os.path.join(workdirs, run_name or name)
  if profile_steps:
    overrides = (*overrides, f"--config.profile_steps={profile_steps}")
  shutil.rmtree(workdir, ignore_errors=True)  # a workdir with checkpoints would resume.
  start = time.perf_counter()
  returncode, tail = _streamed([sys.executable, os.path.join(ROOT, "main.py"),
                                f"--config={os.path.join(ROOT, 'configs', name + '.py')}",
                                *overrides, f"--workdir={workdir}"],
                               label=run_name or name, timeout_s=timeout_s)
  seconds = time.perf_counter() - start
  if returncode != 0:
    raise RunFailed(f"error: {run_name or name} failed:\n{tail[-3000:]}")
  rows = metrics_rows(workdir)
  last_eval = [r for r in rows if "eval_top1" in r][-1]
  train_rows = [r for r in rows if "train_loss" in r]
  rates = untraced_rates(train_rows, profile_steps=profile_steps)
  config = configs.get(name)
  traced = {}
  if profile_steps:
    profile = os.path.join(workdir, "profile")
    traced = {"traced": {"steps": profile_steps,
                         **trace_stats.device_timeline(profile, steps=profile_steps)}}
    if trace_to:
      shutil.copy(trace_stats.newest_trace(profile), trace_to)
  return {"config": name, "mesh": f"{config.mesh.data}×{config.mesh.model}",
          "scheme": config.parallelism, "model": config.model,
          "global_batch": config.global_batch_size, "overrides": list(overrides),
          "wall_clock_s": round(seconds, 1), "steps": last_eval["step"],
          "eval_top1": round(last_eval["eval_top1"], 4),
          "eval_top5": round(last_eval["eval_top5"], 4),
          "eval_loss": round(last_eval["eval_loss"], 4),
          "final_train_loss": round(train_rows[-1]["train_loss"], 4),
          "train_images_per_sec_median": round(statistics.median(rates), 1) if rates else None,
          **traced}


# absl's prefix of a log line ("I1127 16:22:15.438671 140252 train.py:215] "): the study's own
# line names the run instead.
_ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [^\]]+\] ")


def _streamed(command: list[str], *, label: str, timeout_s: float | None) -> tuple[int, str]:
  """Runs `command` (a main.py run), passing each line it logs on to this process's stderr as
  it comes (the compile, each log step with its ETA, each evaluation), after `label`: a run
  takes minutes, and a study that trains many would otherwise say nothing until each ends.
  Returns its exit status and its last lines (the error, where it failed)."""
  process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, bufsize=1)
  # The deadline kills the run from another thread: reading its lines blocks.
  deadline = threading.Timer(timeout_s, process.kill) if timeout_s else None
  if deadline:
    deadline.start()
  tail = collections.deque(maxlen=40)
  try:
    for line in process.stdout:
      tail.append(line)
      print(f"{label} | {_ABSL_PREFIX.sub('', line)}", end="", file=sys.stderr, flush=True)
    returncode = process.wait()
  finally:
    if deadline:
      deadline.cancel()
    if process.poll() is None:  # this study was stopped: its run ends with it.
      process.kill()
      process.wait()
  if timeout_s and returncode == -signal.SIGKILL:
    tail.append(f"stopped after its time limit of {timeout_s:.0f} s.\n")
  return returncode, "".join(tail)


def untraced_rates(train_rows: list[dict], *, profile_steps: int) -> list[float]:
  """The images/s of each log window (metrics.jsonl's train rows, `step` = the steps done) after
  the first step's compile and the traced steps (main.py traces steps 2 … profile_steps + 1):
  a window that holds either is not the loop's rate."""
  ends = [r["step"] for r in train_rows]
  return [r["images_per_sec"] for r, start in zip(train_rows[1:], ends)
          if start >= profile_steps + 1]


def against_step(run: dict, step: dict) -> dict:
  """A run of main.py (`run_config`) against the bare step of the same config (step_timing's
  `step`), as the trainer rows of the GPU and input pipeline pages show them."""
  rate = run["train_images_per_sec_median"]
  row = {"trainer_images_per_sec": rate, "step_images_per_sec": step["images_per_sec"],
         "trainer_vs_step": round(rate / step["images_per_sec"], 3), "steps": run["steps"],
         "wall_clock_s": run["wall_clock_s"]}
  if "traced" in run:  # when main.py's device worked and waited (run_config's profile_steps).
    row["traced"] = run["traced"]
  if "images_per_sec_pipelined" in step:  # steps dispatched back to back (step_timing).
    row.update(step_images_per_sec_pipelined=step["images_per_sec_pipelined"],
               trainer_vs_pipelined_step=round(rate / step["images_per_sec_pipelined"], 3))
  return row


def metrics_rows(workdir: str) -> list[dict]:
  """The rows main.py wrote to workdir/metrics.jsonl."""
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f]
