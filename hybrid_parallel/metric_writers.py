"""Where training metrics go: `<workdir>/metrics.jsonl`, TensorBoard event files, the console."""

import json
import logging as std_logging
import os
import time

from absl import logging
from tensorboardX import summary
from tensorboardX.event_file_writer import EventsWriter
from tensorboardX.proto import event_pb2


def quiet_info_from(library: str) -> None:
  """Drops the INFO lines logged from files under `library` (orbax: a dozen per checkpoint;
  tfds: several per split read); its warnings and errors still show, one line each — without
  the tracebacks its background threads attach (the caller reports the failure itself, in one
  sentence). asyncio's report of a task of `library`'s whose exception nobody retrieved (orbax
  writes a checkpoint's fragments as concurrent tasks: when a full disk fails one, the others'
  errors may be collected unread) is `library`'s error too, and is shortened the same way."""
  where = f"{os.sep}{library}{os.sep}"

  def keep(record) -> bool:
    about_a_task = record.name == "asyncio" and where in str(record.getMessage())
    if where not in record.pathname and not about_a_task:
      return True
    # std logging's levels (absl's constants differ: its WARNING is 1).
    if record.levelno < std_logging.WARNING:
      return False
    record.exc_info, record.exc_text, record.stack_info = None, None, None
    record.msg, record.args = str(record.getMessage()).splitlines()[0], ()
    return True

  keep.library = library
  for handler in (*std_logging.root.handlers, logging.get_absl_handler().python_handler):
    if not any(getattr(f, "library", None) == library for f in handler.filters):
      handler.addFilter(keep)


# The key of a metrics.jsonl row that notes the settings a run changed when it went on from a
# checkpoint (MetricWriter.note_changes), not a metric.
CHANGED = "changed"


def drop_rows_after(path: str, step: int) -> int:
  """Removes the rows of metrics.jsonl at `path` logged after `step`, and the note of changes
  made at `step` (the run that goes on from there writes its own), rewriting it atomically (a
  crash leaves the old file or the new one, never half of one). Returns how many went."""
  if not os.path.exists(path):
    return 0
  with open(path) as f:
    lines = f.readlines()
  rows = [json.loads(line) if line.strip() else None for line in lines]
  kept = [line for line, row in zip(lines, rows)
          if row and (row["step"] < step or row["step"] == step and CHANGED not in row)]
  if len(kept) == len(lines):
    return 0
  temporary = f"{path}.tmp"
  with open(temporary, "w") as f:
    f.writelines(kept)
    f.flush()
    os.fsync(f.fileno())
  os.replace(temporary, path)
  return len(lines) - len(kept)


class MetricWriter:
  """Appends each row to metrics.jsonl and to TensorBoard (only process 0 should create one).

  A run that resumes at `first_step` continues both records from there: rows and events that an
  interrupted run logged after its last checkpoint are dropped (`drop_rows_after`; TensorBoard's
  purge step), so that every step appears once.
  """

  def __init__(self, workdir: str, *, first_step: int = 0):
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "metrics.jsonl")
    dropped = drop_rows_after(path, first_step)
    if dropped:
      logging.info("dropped %d metrics row(s) logged after step %d, which this run repeats.",
                   dropped, first_step)
    self._jsonl = open(path, "a")
    # Written here, not through tensorboardX's SummaryWriter: that queues events for a thread
    # and its flush() does not wait for the queue, so a SIGKILL could lose a step's event whose
    # metrics row was on disk — and the restart, repeating only the steps after its checkpoint,
    # never wrote it again (faults_test's kill-and-restart, once in a loaded suite).
    # Its own file, named in order after any earlier run's: the file name's clock has whole
    # seconds, and a second writer within the same one truncated the first's file.
    self._tensorboard = EventsWriter(os.path.join(workdir, "events"),
                                     filename_suffix=f".{time.time_ns()}")
    # TensorBoard hides the events an earlier run logged from here on (tensorboardX's purge_step).
    self._tensorboard.write_event(event_pb2.Event(
        step=first_step + 1, wall_time=time.time(),
        session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START)))
    self._tensorboard.flush()

  def write(self, step: int, row: dict[str, float]) -> None:
    """Appends `row` at `step` to both records; both are on disk when it returns."""
    self._jsonl.write(json.dumps({"step": step, **row}) + "\n")
    self._jsonl.flush()
    for name, value in row.items():
      self._tensorboard.write_event(event_pb2.Event(step=step, wall_time=time.time(),
                                                    summary=summary.scalar(name, value)))
    self._tensorboard.flush()

  def note_changes(self, step: int, changes: dict[str, tuple]) -> None:
    """Appends the row that says which settings the run changed when it went on from `step`:
    {"step": step, "changed": {field: [before, after]}} (no TensorBoard event: not a metric)."""
    self._jsonl.write(json.dumps({"step": step, CHANGED: {
        field: list(values) for field, values in changes.items()}}) + "\n")
    self._jsonl.flush()

  def close(self) -> None:
    self._jsonl.close()
    self._tensorboard.close()


class Progress:
  """One console line per log step: step, loss, accuracy, learning rate, images/s and ETA."""

  def __init__(self, total_steps: int, first_step: int = 0):
    self._total = total_steps
    self._first = first_step  # a resumed run starts here; its rate counts from here.
    self._start = time.perf_counter()

  def log(self, step: int, row: dict[str, float]) -> None:
    elapsed = time.perf_counter() - self._start
    done = step - self._first
    eta = elapsed / done * (self._total - step) if done > 0 else float("nan")
    logging.info("step %d/%d | loss %.4f | acc %.1f%% | lr %.4g | %.1f img/s | ETA %s", step,
                 self._total, row["train_loss"], 100 * row["train_accuracy"],
                 row["learning_rate"], row["images_per_sec"], _duration(eta))


def _duration(seconds: float) -> str:
  if seconds != seconds:  # NaN: nothing measured yet.
    return "?"
  minutes, seconds = divmod(int(seconds), 60)
  return f"{minutes}m{seconds:02d}s"
