"""Surviving faults: preemption and Ctrl-C, non-finite steps, processes that stop answering."""

import os
import signal
import sys
import threading
import time

import numpy as np
from absl import logging


class Stopped(Exception):
  """Training stopped at a signal after saving a checkpoint at `step` (see `Preemption`)."""

  def __init__(self, signum: int, step: int):
    self.signum, self.step = signum, step
    super().__init__(f"{signal.Signals(signum).name}: saved the checkpoint at step {step}; "
                     f"exiting.")

  @property
  def exit_code(self) -> int:
    """0 after SIGTERM (a preemption handled as asked: schedulers restart such jobs); 130 after
    SIGINT (Ctrl-C), as a shell reports an interrupted program."""
    return 0 if self.signum == signal.SIGTERM else 128 + self.signum


class Preemption:
  """SIGTERM or SIGINT (Ctrl-C) → `received` holds it; the loop then finishes the step in flight,
  saves a checkpoint and stops (`Stopped`). A second such signal exits at once, saving nothing.

  Use as a context manager around the training loop; the previous handlers are put back on exit.
  Only the main thread can install signal handlers; elsewhere (a notebook's worker thread) this
  does nothing.
  """
  SIGNALS = (signal.SIGTERM, signal.SIGINT)

  def __init__(self):
    self.received: int | None = None
    self._previous = {}

  @property
  def requested(self) -> bool:
    return self.received is not None

  def _handle(self, signum, frame):
    del frame
    name = signal.Signals(signum).name
    if self.received is not None:
      print(f"error: a second {name} arrived; exiting now without saving.", file=sys.stderr,
            flush=True)
      os._exit(128 + signum)
    self.received = signum
    logging.warning("%s: finishing the step in flight, then saving a checkpoint and exiting.",
                    name)

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
    return self

  def __exit__(self, *exc):
    for signum, previous in self._previous.items():
      signal.signal(signum, previous)


class NonFiniteStep(FloatingPointError):
  """The loss or the gradients of step `step` were NaN or Inf."""

  def __init__(self, message: str, *, step: int):
    super().__init__(message)
    self.step = step


def check_finite(step: int, metrics: dict, last_checkpoint: int | None) -> None:
  """Raises NonFiniteStep naming `step` if its loss or gradients were not finite."""
  loss = float(np.asarray(metrics["train_loss"]))
  bad_grads = float(np.asarray(metrics.get("nonfinite_grads", 0.0))) > 0
  if np.isfinite(loss) and not bad_grads:
    return
  what = (f"the training loss became {loss}" if not np.isfinite(loss)
          else "the gradients held NaN or Inf")
  kept = (f"the last good checkpoint (step {last_checkpoint}) is kept" if last_checkpoint
          else "no checkpoint had been written")
  raise NonFiniteStep(f"{what} at step {step}; {kept} (config.skip_nonfinite_steps skips such "
                      f"steps instead).", step=step)


class ChanceWatch:
  """Says once when the training loss sits at chance level after warmup: a run that diverged
  without a NaN (the loss of a uniform guess is ln C for C classes).

  `observe(step, loss, learning_rate)` after every logged training row. A loss within
  `tolerance` of ln C for `rows` rows in a row past `warmup_steps`, after it had been away from
  ln C (learning, or blowing up), is a run that came back to chance; one that has never left ln C
  is only said after `rows_from_start` rows past warmup, since a network at a low rate can take
  a few epochs to leave it (AlexNet on digits at the base rate does). It logs one warning naming
  the step and the learning rate, and returns True (that once).
  """

  def __init__(self, num_classes: int, warmup_steps: int, *, rows: int = 3,
               rows_from_start: int = 10, tolerance: float = 0.02):
    self.chance = float(np.log(num_classes))
    self.warmup_steps, self.rows, self.tolerance = warmup_steps, rows, tolerance
    self.rows_from_start = rows_from_start
    self._streak, self._left_chance, self._said = 0, False, False

  def observe(self, step: int, loss: float, learning_rate: float) -> bool:
    at_chance = abs(loss - self.chance) <= self.tolerance * self.chance
    self._left_chance |= not at_chance  # warmup included: a loss that blew up there counts.
    if self._said or step <= self.warmup_steps:
      return False
    self._streak = self._streak + 1 if at_chance else 0
    if self._streak < (self.rows if self._left_chance else self.rows_from_start):
      return False
    self._said = True
    logging.warning("the training loss is %.4f at step %d, chance level (ln %d = %.4f) for %d "
                    "logged rows after warmup, at learning rate %.4g: the run has probably "
                    "diverged (a lower rate, a longer warmup or LARS may help).", loss, step,
                    round(np.exp(self.chance)), self.chance, self._streak, learning_rate)
    return True


class Watchdog:
  """Ends the process with one sentence if no step finishes for `timeout_s` seconds.

  With many processes, a collective waits forever for a peer that died; this bounds the wait.
  `beat()` after every finished step; the clock starts at the first beat (compilation is free).
  """

  def __init__(self, timeout_s: float, what: str):
    self.timeout_s = timeout_s
    self.what = what
    self._last = None
    self._stop = threading.Event()
    self._thread = None

  def beat(self) -> None:
    self._last = time.monotonic()
    if self._thread is None and self.timeout_s > 0:
      self._thread = threading.Thread(target=self._watch, daemon=True, name="watchdog")
      self._thread.start()

  def _watch(self):
    while not self._stop.wait(min(5.0, self.timeout_s / 4)):
      if time.monotonic() - self._last > self.timeout_s:
        print(f"error: no training step finished in {self.timeout_s:.0f} s; {self.what}",
              file=sys.stderr, flush=True)
        os._exit(1)

  def close(self) -> None:
    self._stop.set()
