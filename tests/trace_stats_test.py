"""The device time per operation read back from a real `jax.profiler` trace."""

import gzip
import json
import os
import shutil
import tempfile
import time

import jax
import jax.numpy as jnp
from absl.testing import absltest

import benchmarks
from benchmarks.common import trace_stats

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")


class TraceStatsTest(absltest.TestCase):

  def test_top_ops_are_the_programs_operations(self):
    @jax.jit
    def program(x):
      return jnp.tanh(x @ x) @ x

    x = jnp.ones((512, 512))
    hlo = program.lower(x).compile().as_text()
    program(x).block_until_ready()  # compiled before the trace.
    with tempfile.TemporaryDirectory() as directory:
      jax.profiler.start_trace(directory)
      for _ in range(3):
        program(x).block_until_ready()
      jax.profiler.stop_trace()
      ops = trace_stats.top_ops(directory, steps=3)
    self.assertNotEmpty(ops)
    for op in ops:  # each is an instruction of the compiled program, run once per step.
      self.assertIn(f"%{op['op']} = ", hlo)
      self.assertEqual(op["calls"], 3)
    # Each share is rounded to 4 places (trace_stats.top_ops): their sum within that of 1.
    self.assertAlmostEqual(sum(op["share"] for op in ops), 1.0, delta=5e-5 * len(ops) + 1e-12)
    self.assertEqual([op["ms_per_step"] for op in ops],
                     sorted((op["ms_per_step"] for op in ops), reverse=True))

  def test_a_gpu_trace_counts_its_cuda_stream_only(self):
    # The H200's trace (docs/gpu.md): only the GPU's kernels count, so their time per step is
    # below the traced step's.
    profile = benchmarks.load_results(os.path.join(DOCS, "gpu.json"))[1]["sections"]["profile"][
        "result"]
    with tempfile.TemporaryDirectory() as directory:
      trace = os.path.join(directory, "h200.trace.json.gz")
      shutil.copy(os.path.join(DOCS, "gpu_profile.trace.json.gz"), trace)
      device_ms = trace_stats.device_ms_per_step(directory, steps=profile["steps"])
      ops = trace_stats.top_ops(directory, steps=profile["steps"], top=100)
      with gzip.open(trace, "rt") as f:
        events = json.load(f)["traceEvents"]
    self.assertBetween(device_ms, 0.5 * profile["step_ms_while_tracing"],
                       profile["step_ms_while_tracing"])
    self.assertAlmostEqual(sum(op["ms_per_step"] for op in ops), device_ms, delta=0.01)
    host = [e for e in events if e.get("ph") == "X" and "hlo_op" not in e.get("args", {})]
    self.assertNotEmpty(host)  # the host's events (launches, waits) are not device time.
    # A cuDNN call's kernel is its GEMM, not the memset that starts it.
    conv = next(op for op in ops if op["op"].startswith("cudnn-conv-bw-filter"))
    self.assertIn("gemm", conv["kernel"])

  def test_an_empty_device_timeline_leaves_the_hosts_operations_counted(self):
    # Once libtpu is loaded in a process (a TPU compile-only topology), every trace has an empty
    # `/device:CUSTOM:Megascale Trace` timeline; a CPU run's operations are still its host's.
    meta = lambda pid, name: {"ph": "M", "name": "process_name", "pid": pid,  # noqa: E731
                              "args": {"name": name}}
    events = [meta(1, "/device:CUSTOM:Megascale Trace"), meta(701, "/host:CPU"),
              *({"ph": "X", "pid": 701, "tid": 1, "name": "thunk", "dur": 5.0,
                 "args": {"hlo_op": "dot.1"}} for _ in range(2))]
    with tempfile.TemporaryDirectory() as directory:
      with gzip.open(os.path.join(directory, "cpu.trace.json.gz"), "wt") as f:
        json.dump({"traceEvents": events}, f)
      ops = trace_stats.top_ops(directory, steps=2)
    self.assertEqual([(op["op"], op["calls"], op["ms_per_step"]) for op in ops],
                     [("dot.1", 2, 0.005)])

  def test_the_timeline_finds_the_waits_between_steps(self):
    @jax.jit
    def program(x):
      return jnp.tanh(x @ x) @ x

    x = jnp.ones((256, 256))
    program(x).block_until_ready()  # compiled before the trace.
    with tempfile.TemporaryDirectory() as directory:
      jax.profiler.start_trace(directory)
      for _ in range(4):
        program(x).block_until_ready()
        time.sleep(0.2)  # the host's 200 ms between steps: the device waits at least that.
      jax.profiler.stop_trace()
      timeline = trace_stats.device_timeline(directory, steps=4)
    self.assertLen(timeline["longest_gaps_ms"], 3)
    for gap in timeline["longest_gaps_ms"]:
      self.assertGreaterEqual(gap, 200.0 - 1e-3)  # rounded to the microsecond.
    # A few ms of work per 200 ms wait: below half even were a loaded machine to take 30× as long.
    self.assertLess(timeline["busy_share"], 0.5)

  def test_overlapping_operations_count_once(self):
    # XLA:CPU runs operations on several threads at once: one within another's time is busy for
    # the outer one's 20 µs (not 30), then a 10 µs gap, then 10 µs of work.
    meta = {"ph": "M", "name": "process_name", "pid": 701, "args": {"name": "/host:CPU"}}
    events = [meta, *({"ph": "X", "pid": 701, "tid": tid, "name": "thunk", "ts": ts,
                       "dur": dur, "args": {"hlo_op": f"op{tid}"}}
                      for tid, ts, dur in ((1, 0.0, 20.0), (2, 5.0, 10.0), (1, 30.0, 10.0)))]
    with tempfile.TemporaryDirectory() as directory:
      path = os.path.join(directory, "cpu.trace.json.gz")
      with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
      timeline = trace_stats.device_timeline(path, steps=2)
    self.assertEqual(timeline, {"busy_share": 0.75, "busy_ms_per_step": 0.015,
                                "longest_gaps_ms": [0.01], "other_gaps_ms_per_step": 0.0})

  def test_the_h200_steps_waited_for_the_host_between_them(self):
    # The bare step of docs/gpu.md waits for each step's result before it starts the next: its
    # trace shows the GPU idle between steps for about a millisecond, and otherwise busy but for
    # the microseconds between kernel launches.
    profile = benchmarks.load_results(os.path.join(DOCS, "gpu.json"))[1]["sections"]["profile"][
        "result"]
    trace = os.path.join(DOCS, "gpu_profile.trace.json.gz")
    timeline = trace_stats.device_timeline(trace, steps=profile["steps"])
    self.assertLen(timeline["longest_gaps_ms"], profile["steps"] - 1)
    for gap in timeline["longest_gaps_ms"]:
      self.assertBetween(gap, 0.5, 2.0)
    self.assertLess(timeline["other_gaps_ms_per_step"], 0.1)
    # The union of the kernels' times is at most their sum (some overlap on the stream).
    self.assertBetween(timeline["busy_ms_per_step"], 0.95 * profile["device_ms_per_step"],
                       profile["device_ms_per_step"])
    # Busy and idle make up the span.
    span = timeline["busy_ms_per_step"] * profile["steps"] / timeline["busy_share"]
    self.assertAlmostEqual(span, timeline["busy_ms_per_step"] * profile["steps"] +
                           sum(timeline["longest_gaps_ms"]) +
                           timeline["other_gaps_ms_per_step"] * profile["steps"], delta=0.01)

  def test_no_trace_is_one_clear_error(self):
    with tempfile.TemporaryDirectory() as directory:
      with self.assertRaisesRegex(FileNotFoundError, "no \\*.trace.json.gz under"):
        trace_stats.top_ops(directory, steps=1)
      with self.assertRaisesRegex(FileNotFoundError, "no \\*.trace.json.gz under"):
        trace_stats.device_timeline(os.path.join(directory, "gone.trace.json.gz"), steps=1)


if __name__ == "__main__":
  absltest.main()
