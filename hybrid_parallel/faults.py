"""Surviving faults: preemption (SIGTERM), non-finite steps, and processes that stop answering."""

import os
import signal
import sys
import threading
import time

import numpy as np
from absl import logging


class Preemption:
  """SIGTERM → `requested` becomes True (the loop then saves and exits 0); a second one exits now.

  Use as a context manager around the training loop; the previous handler is put back on exit.
  Only the main thread can install signal handlers; elsewhere (a notebook's worker thread) this
  does nothing.
  """

  def __init__(self):
    self.requested = False
    self._previous = None

  def _handle(self, signum, frame):
    del frame
    if self.requested:
      print("error: a second SIGTERM arrived; exiting now without saving.", file=sys.stderr,
            flush=True)
      os._exit(128 + signum)
    self.requested = True
    logging.warning("SIGTERM: finishing the step in flight, then saving a checkpoint and exiting.")

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    return self

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)


class NonFiniteStep(FloatingPointError):
  """The loss or the gradients of a step were NaN or Inf."""


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
                      f"steps instead).")


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
