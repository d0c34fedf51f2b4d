"""Where the time of a `jax.profiler` trace goes: device time per XLA operation.

Reads the `*.trace.json.gz` that `jax.profiler` writes (what `config.profile_steps` and
`profiling.StepProfiler` produce). An event counts as device work when the runtime tagged it with
the HLO operation it ran (`args.hlo_op`: XLA:CPU's thunks, XLA:GPU's kernels) or when it lies on a
device's own timeline (`/device:...`), which holds the GPU kernels.
"""

import collections
import glob
import gzip
import json
import os


def newest_trace(directory: str) -> str:
  """The newest `*.trace.json.gz` under `directory` (a trace directory or a run's profile/)."""
  traces = glob.glob(os.path.join(directory, "**", "*.trace.json.gz"), recursive=True)
  if not traces:
    raise FileNotFoundError(f"no *.trace.json.gz under {directory}")
  return max(traces, key=os.path.getmtime)


def top_ops(directory: str, *, steps: int, top: int = 15) -> list[dict]:
  """The `top` operations by device time in the newest trace under `directory`.

  Returns:
    One dict per operation, largest first: `op` (the HLO operation, or the kernel name where the
    runtime gave none), `ms_per_step` (its summed duration ÷ `steps`), `share` (of all device
    time counted), `calls` and `kernel` (an event name it ran as).
  """
  with gzip.open(newest_trace(directory), "rt") as f:
    events = json.load(f)["traceEvents"]
  device_pids = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") ==
                 "process_name" and "/device:" in e.get("args", {}).get("name", "")}
  time_us, calls, kernel = collections.Counter(), collections.Counter(), {}
  for e in events:
    if e.get("ph") != "X" or "dur" not in e:
      continue
    op = e.get("args", {}).get("hlo_op")
    if op is None and e["pid"] not in device_pids:
      continue
    op = op or e["name"]
    time_us[op] += e["dur"]
    calls[op] += 1
    kernel.setdefault(op, e["name"])
  total = sum(time_us.values()) or 1.0
  return [{"op": op, "ms_per_step": round(us / 1e3 / steps, 3), "share": round(us / total, 4),
           "calls": calls[op], "kernel": kernel[op]} for op, us in time_us.most_common(top)]
