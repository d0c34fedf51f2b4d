"""Where the time of a `jax.profiler` trace goes: device time per XLA operation.

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
  """The newest `*.trace.json.gz` under `directory` (a trace directory or a run's profile/)."""
  traces = glob.glob(os.path.join(directory, "**", "*.trace.json.gz"), recursive=True)
  if not traces:
    raise FileNotFoundError(f"no *.trace.json.gz under {directory}")
  return max(traces, key=os.path.getmtime)


def _device_time(directory: str):
  """Device microseconds, calls and a kernel name per operation in the newest trace."""
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
  time_us, calls = collections.Counter(), collections.Counter()
  kernel = collections.defaultdict(collections.Counter)
  for e in events:
    if e.get("ph") != "X" or "dur" not in e:
      continue
    on_device = e["pid"] in device_names
    op = e.get("args", {}).get("hlo_op")
    if (accelerator_only and not on_device) or (op is None and not on_device):
      continue
    if streams and on_device and (e["pid"], e.get("tid")) not in streams:
      continue
    op = op or e["name"]
    time_us[op] += e["dur"]
    calls[op] += 1
    kernel[op][e["name"]] += e["dur"]
  # The kernel an operation spent most of its time in (a cuDNN call also runs memsets and
  # padding kernels).
  return time_us, calls, {op: names.most_common(1)[0][0] for op, names in kernel.items()}


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
