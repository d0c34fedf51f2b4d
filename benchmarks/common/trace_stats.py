"""Where the time of a `jax.profiler` trace goes: device time per XLA operation, and when the
device waited.

Reads the `*.trace.json.gz` that `jax.profiler` writes (what `config.profile_steps` and
`profiling.StepProfiler` produce). An event counts as device work when the runtime tagged it with
the HLO operation it ran (`args.hlo_op`: XLA:CPU's thunks) or when it lies on a device's own
timeline (`/device:...`), which holds the GPU kernels. When the trace has an accelerator's
timeline, only that timeline counts, and on it only its CUDA streams (`Stream #...`) when it has
them: host events tagged with an operation, or lines derived from the streams (`XLA Ops`, `XLA
Modules`, `Steps`, which profilers of other versions write), would count a kernel twice. (The
H200 trace in docs/ has kernels on one stream only.)
"""

import collections
import glob
import gzip
import json
import os


def newest_trace(directory: str) -> str:
  """The newest `*.trace.json.gz` under `directory` (a trace directory or a run's profile/), or
  `directory` itself where it is such a file."""
  if directory.endswith(".trace.json.gz") and os.path.isfile(directory):
    return directory
  traces = glob.glob(os.path.join(directory, "**", "*.trace.json.gz"), recursive=True)
  if not traces:
    raise FileNotFoundError(f"no *.trace.json.gz under {directory}")
  return max(traces, key=os.path.getmtime)


def _device_events(directory: str):
  """(operation, event) of each device event in `newest_trace(directory)`: the operation its
  runtime tagged it with, or the kernel's name."""
  with gzip.open(newest_trace(directory), "rt") as f:
    events = json.load(f)["traceEvents"]
  device_names = {e["pid"]: e.get("args", {}).get("name", "") for e in events
                  if e.get("ph") == "M" and e.get("name") == "process_name"
                  and "/device:" in e.get("args", {}).get("name", "")}
  # A timeline with no work on it does not count: libtpu, once loaded (a TPU compile-only
  # topology), adds an empty `/device:CUSTOM:Megascale Trace` to every trace, CPU runs' too.
  worked = {e["pid"] for e in events if e.get("ph") == "X" and e["pid"] in device_names}
  accelerator_only = any("/device:CPU" not in device_names[pid] for pid in worked)
  threads = {(e["pid"], e["tid"]): e.get("args", {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name" and "tid" in e}
  streams = {key for key, name in threads.items()
             if key[0] in device_names and name.startswith("Stream")}
  for e in events:
    if e.get("ph") != "X" or "dur" not in e:
      continue
    on_device = e["pid"] in device_names
    op = e.get("args", {}).get("hlo_op")
    if (accelerator_only and not on_device) or (op is None and not on_device):
      continue
    if streams and on_device and (e["pid"], e.get("tid")) not in streams:
      continue
    yield op or e["name"], e


def _device_time(directory: str):
  """Device microseconds, calls and a kernel name per operation in the newest trace."""
  time_us, calls = collections.Counter(), collections.Counter()
  kernel = collections.defaultdict(collections.Counter)
  for op, e in _device_events(directory):
    time_us[op] += e["dur"]
    calls[op] += 1
    kernel[op][e["name"]] += e["dur"]
  # The kernel an operation spent most of its time in (a cuDNN call also runs memsets and
  # padding kernels).
  return time_us, calls, {op: names.most_common(1)[0][0] for op, names in kernel.items()}


def device_timeline(directory: str, *, steps: int) -> dict:
  """When the device worked during `steps` traced steps, from its first event to its last: the
  share of that span with any device event running (`busy_share`), that busy time per step
  (operations overlapping in time, as XLA:CPU's threads run them, count once), the `steps` − 1
  longest idle gaps (where a step waited for the host: between steps, when each step waits for
  the one before) and every other gap per step (kernel launches)."""
  intervals = sorted((e["ts"], e["ts"] + e["dur"]) for _, e in _device_events(directory))
  if not intervals:
    raise ValueError(f"{newest_trace(directory)} has no device events")
  busy, gaps = 0.0, []
  start, end = intervals[0]
  for next_start, next_end in intervals[1:]:
    if next_start > end:
      busy += end - start
      gaps.append(next_start - end)
      start = next_start
    end = max(end, next_end)
  busy += end - start
  span = end - intervals[0][0]
  gaps.sort(reverse=True)
  longest = gaps[:steps - 1]
  return {"busy_share": round(busy / span, 4), "busy_ms_per_step": round(busy / 1e3 / steps, 3),
          "longest_gaps_ms": [round(g / 1e3, 3) for g in longest],
          "other_gaps_ms_per_step": round(sum(gaps[steps - 1:]) / 1e3 / steps, 3)}


def device_ms_per_step(directory: str, *, steps: int) -> float:
  """All device time counted in the newest trace under `directory`, per step."""
  return round(sum(_device_time(directory)[0].values()) / 1e3 / steps, 3)


def top_ops(directory: str, *, steps: int, top: int = 15) -> list[dict]:
  """The `top` operations by device time in the newest trace under `directory`.

  Returns:
    One dict per operation, largest first: `op` (the HLO operation, or the kernel name where the
    runtime gave none), `ms_per_step` (its summed duration ÷ `steps`), `share` (of all device
    time counted), `calls` and `kernel` (the event name it spent most time in).
  """
  time_us, calls, kernel = _device_time(directory)
  total = sum(time_us.values()) or 1.0
  return [{"op": op, "ms_per_step": round(us / 1e3 / steps, 3), "share": round(us / total, 4),
           "calls": calls[op], "kernel": kernel[op]} for op, us in time_us.most_common(top)]

