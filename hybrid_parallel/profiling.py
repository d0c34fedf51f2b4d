"""`config.profile_steps`: a `jax.profiler` trace of a few training steps, written to the workdir.

The trace (TensorBoard's profile plugin / XProf read `profile/plugins/profile/<run>/*.xplane.pb`;
Perfetto reads the `*.trace.json.gz` beside it) covers `profile_steps` steps after the first one
run in this process, which compiles. Only process 0 traces.
"""

import os

import jax
from absl import logging


class StepProfiler:
  """Starts a trace before step `first_step + 1` and stops it `steps` steps later.

  Call `before(step)` before dispatching a step and `after(step, outputs)` once it is dispatched;
  the trace stops only when the last traced step's outputs are ready, so it holds whole steps.
  """

  def __init__(self, workdir: str, first_step: int, steps: int):
    self.directory = os.path.join(workdir, "profile")
    self.start = first_step + 1  # the first step compiles: not what a profile is for.
    self.stop = self.start + steps
    self.enabled = steps > 0 and jax.process_index() == 0
    self.active = False

  def before(self, step: int) -> None:
    if self.enabled and step == self.start:
      jax.profiler.start_trace(self.directory)
      self.active = True

  def after(self, step: int, outputs) -> None:
    if self.active and step + 1 >= self.stop:
      self.close(outputs)

  def close(self, outputs=None) -> None:
    """Stops a running trace (also when training ends early), after `outputs` are ready."""
    if not self.active:
      return
    jax.block_until_ready(outputs)
    jax.profiler.stop_trace()
    self.active = False
    logging.info("wrote a profile of steps %d–%d to %s", self.start + 1, self.stop,
                 self.directory)
