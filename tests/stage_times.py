"""`pytest --stage-times`: where the suite's time goes, test by test — the seconds JAX spent
making programs (tracing, lowering, and XLA's compile or the persistent cache's read, with the
cache's write after a compile: train.py's compile events, their spans' union, so that a program
traced inside another counts once), the CPU of the processes a test started and waited for
(`main.py` runs, benchmarks' dry runs), and the test process's own CPU. `--durations` says which
tests are long; this says what in them.

Each process that runs tests measures them (the hooks in tests/conftest.py call `Clock`); the
numbers travel to the process that reports (pytest-xdist's controller) in each report's
user_properties, which xdist sends as they are; `Totals` adds them up, by scope (a test class,
or a module's functions: what loadscope hands a worker). What ran between tests (collection,
test modules' imports, a class's setup is not: it is its first test's) is a row of its own.
"""

import collections
import json
import resource
import threading
import time

import jax

import train

KEY = "stage_times"  # the user_properties entry of a test phase's row
BETWEEN = "stage_times_between"  # ... and of what ran before the phase, outside any test
# The stages of making a program, by the event JAX records with its span (train._COMPILE_EVENTS).
STAGES = {"/jax/core/compile/jaxpr_trace_duration": "trace",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
          "/jax/core/compile/backend_compile_duration": "compile"}
assert set(STAGES) == set(train._COMPILE_EVENTS), "train.py's compile events changed"
# A compile that was a read of the persistent cache, reported as a duration only.
CACHE_READ = "/jax/compilation_cache/cache_retrieval_time_sec"
COLUMNS = ("wall", "cpu", "children_cpu", "making_programs", "trace", "lower", "compile",
           "cache_read")


def _children_cpu() -> float:
  """CPU seconds of this process's ended and waited-for children, all of them so far."""
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


class Clock:
  """The spans of JAX's compile events and the CPU counters of one process; `lap` gives what
  accrued since the previous lap (or the clock's start). JAX reports from any thread."""

  def __init__(self):
    self._lock = threading.Lock()
    self._spans, self._cache_read = [], 0.0  # (stage, start, end) and seconds since the lap
    self._mark = self._now()
    jax.monitoring.register_event_time_span_listener(self._span)
    jax.monitoring.register_event_duration_secs_listener(self._duration)

  @staticmethod
  def _now() -> tuple[float, float, float, float]:
    # time.time() clips JAX's spans, which it stamps with that clock; perf_counter times.
    return time.time(), time.perf_counter(), time.process_time(), _children_cpu()

  def _span(self, event: str, start_s: float, end_s: float, **_) -> None:
    if event in STAGES:
      with self._lock:
        self._spans.append((STAGES[event], start_s, end_s))

  def _duration(self, event: str, seconds: float, **_) -> None:
    if event == CACHE_READ:
      with self._lock:
        self._cache_read += seconds

  def lap(self) -> dict[str, float]:
    """The seconds of each column since the last lap; a new lap starts."""
    now = self._now()
    with self._lock:
      spans, self._spans = self._spans, []
      cache_read, self._cache_read = self._cache_read, 0.0
    since = self._mark[0]
    clipped = [(stage, max(start, since), end) for stage, start, end in spans if end > since]
    row = {"wall": now[1] - self._mark[1], "cpu": now[2] - self._mark[2],
           "children_cpu": now[3] - self._mark[3],
           "making_programs": train._covered([(start, end) for _, start, end in clipped]),
           **{stage: train._covered([(start, end) for s, start, end in clipped if s == stage])
              for stage in STAGES.values()},
           "cache_read": cache_read}
    self._mark = now
    return row


class Totals:
  """The rows of every test phase, as the reporting process receives them."""

  def __init__(self):
    self.rows = []  # (nodeid, phase, row)
    self.between = dict.fromkeys(COLUMNS, 0.0)

  def add(self, report) -> None:
    for key, row in report.user_properties:
      if key == KEY:
        self.rows.append((report.nodeid, report.when, row))
      elif key == BETWEEN:
        for column in COLUMNS:
          self.between[column] += row[column]

  def by_scope(self, scope) -> dict[str, dict[str, float]]:
    """Each column summed over the phases of each scope (`scope(nodeid)`)."""
    sums = collections.defaultdict(lambda: dict.fromkeys(COLUMNS, 0.0))
    for nodeid, _, row in self.rows:
      for column in COLUMNS:
        sums[scope(nodeid)][column] += row[column]
    return dict(sums)

  def write_json(self, path: str) -> None:
    """A line per test phase (setup, call, teardown), and one for what ran between tests."""
    with open(path, "w") as f:
      for nodeid, phase, row in self.rows:
        f.write(json.dumps({"test": nodeid, "phase": phase, **row}) + "\n")
      f.write(json.dumps({"test": None, "phase": "between tests", **self.between}) + "\n")

  def lines(self, scope, *, top: int = 25) -> list[str]:
    """A table: every test's columns summed, what ran between tests, then the `top` scopes
    with the most wall time."""
    scopes = self.by_scope(scope)
    total = {column: sum(s[column] for s in scopes.values()) for column in COLUMNS}
    header = ("| scope | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|")

    def cells(name, sums):
      return f"| {name} | " + " | ".join(f"{sums[c]:.1f}" for c in COLUMNS) + " |"

    ranked = sorted(scopes.items(), key=lambda item: -item[1]["wall"])[:top]
    return [f"seconds, summed over the test processes: cpu the test process's own; "
            f"children_cpu the processes it started and waited for; making_programs the union "
            f"of trace, lower and compile (XLA's, or the persistent cache's read, of which "
            f"cache_read); the {len(ranked)} of {len(scopes)} scopes with the most wall time",
            *header, cells("all tests", total), cells("between tests", self.between),
            *(cells(name, sums) for name, sums in ranked)]
