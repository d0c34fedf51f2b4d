"""Orbax checkpoints of the training state: save asynchronously, resume exactly, reshard.

A checkpoint is one orbax step directory holding two items:
  state  the whole training state (parameters, optimiser state, step, root RNG key data, batch
         statistics) as arrays, written collectively by every process;
  meta   JSON: what wrote it — the run's resolved config ("config": {field: value}), and the
         fields its state's shapes depend on at the top — and the data position: where the
         input pipeline continues, the step number for the in-memory datasets, every input
         shard's stream position for the tfds ones (input_pipeline). A run resumed at step s
         reads the batch of step s + 1 next, as the uninterrupted run did. Whether a restart
         continues the same run is the caller's rule (validation.restart_changes, on
         `latest_meta`); here only a state of other shapes is refused.

Restoring takes an *abstract* state (shapes, dtypes and the new run's shardings), so a checkpoint
written under one mesh and scheme is resharded onto another as it is read: `hybrid4` → `data4` →
`single` and back. The synchronous schemes share one state structure; the local-SGD schemes
(replicas) have their own and restore only onto themselves.

A latest checkpoint that cannot be read (truncated, corrupt) is skipped with a warning for the
one before it; if none can be read, one UserError says so.
"""

import dataclasses
import logging as std_logging
import os
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging

from hybrid_parallel import checks, metric_writers
from hybrid_parallel.errors import UserError

# Fields of the meta item that must agree for a checkpoint's state to restore into a run's.
_SAME_STATE = ("model", "image_size", "optimizer", "fc_updates_per_step", "state_kind")


class CheckpointWriteError(UserError):
  """A checkpoint could not be written (a full disk, an unwritable directory, ...)."""


@dataclasses.dataclass
class Restored:
  state: object
  step: int
  meta: dict


class Checkpointer:
  """Saves every `every_steps` steps into `directory`, keeping the last `keep`.

  Args:
    directory: where the step directories go (a path every process can reach).
    every_steps: save when the step count is a multiple of this (0: only on request).
    keep: how many of the latest checkpoints to keep.
    meta: the run's description, stored with every checkpoint (see module docstring).
  """

  def __init__(self, directory: str, every_steps: int, keep: int, meta: dict):
    checks.integer(1)("checkpoint_keep", keep)
    metric_writers.quiet_info_from("orbax")
    _ignore_callbacks_into_closed_event_loops()
    self.every_steps = every_steps
    self.meta = dict(meta)
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True,
                                           enable_async_checkpointing=True)
    handlers = ocp.handlers.DefaultCheckpointHandlerRegistry()
    state_handler = _state_handler()
    for args in (ocp.args.PyTreeSave, ocp.args.PyTreeRestore):
      handlers.add("state", args, state_handler)
    for args in (ocp.args.JsonSave, ocp.args.JsonRestore):
      handlers.add("meta", args, ocp.JsonCheckpointHandler())
    # orbax needs an absolute path.
    self.manager = ocp.CheckpointManager(os.path.abspath(directory), options=options,
                                         handler_registry=handlers)
    self._in_flight = None  # the step of a save not yet known to be on disk.
    self._failed = False

  def due(self, step: int) -> bool:
    return self.every_steps > 0 and step % self.every_steps == 0

  def save(self, step: int, state, data_position=None) -> None:
    """Starts an asynchronous save of `state` after `step` steps (returns before it is on disk).

    `data_position` is the input pipeline's position after the step (JSON: an int or a list);
    the step itself when not given.

    Raises:
      CheckpointWriteError: this save, or the one before it, could not be written.
    """
    if step in self.manager.all_steps():
      return
    position = step if data_position is None else data_position
    try:
      # orbax reports a failed asynchronous save here, at the next save (or in `wait`).
      self.manager.save(step, args=ocp.args.Composite(
          state=ocp.args.PyTreeSave(state),
          meta=ocp.args.JsonSave(dict(self.meta, step=step, data_position=position))))
    except Exception as e:  # noqa: BLE001 — OSError, or orbax's wrapping of one.
      raise self._write_error(self._in_flight or step, e) from None
    self._in_flight = step

  def wait(self) -> None:
    """Blocks until every started save is committed to disk.

    Raises:
      CheckpointWriteError: a save could not be written.
    """
    try:
      self.manager.wait_until_finished()
    except Exception as e:  # noqa: BLE001
      raise self._write_error(self._in_flight, e) from None
    self._in_flight = None

  def close(self) -> None:
    """Waits for the saves in flight (a started checkpoint is never lost) and closes. After a
    failed save has been reported, closes quietly: the report stands."""
    try:
      if not self._failed:
        self.wait()
    finally:
      try:
        self.manager.close()
      except Exception:  # noqa: BLE001 — its save's failure is what was reported.
        if not self._failed:
          raise

  def _write_error(self, step: int | None, error: Exception) -> CheckpointWriteError:
    self._failed = True
    # The failed save's other writes end as asyncio tasks whose errors nobody retrieves; asyncio
    # would log each, with its traceback, when it is collected. The one report below says it all.
    std_logging.getLogger("asyncio").setLevel(std_logging.CRITICAL)
    self.manager.reload()
    committed = [s for s in self.manager.all_steps() if s != step]
    kept = (f"the checkpoint at step {max(committed)} is still the latest" if committed
            else "there is no earlier checkpoint")
    return CheckpointWriteError(f"the checkpoint at step {step} could not be written to "
                                f"{self.manager.directory} ({_first_line(error)}); {kept}.")

  def latest_meta(self) -> tuple[int, dict] | None:
    """(step, meta) of the newest checkpoint whose meta item reads; None where there is none."""
    for step in sorted(self.manager.all_steps(), reverse=True):
      try:
        meta = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return step, dict(meta["meta"])
      except Exception:  # noqa: BLE001 — unreadable: restore_latest says so, and goes back.
        continue
    return None

  def restore_latest(self, abstract_state) -> Restored | None:
    """The newest readable checkpoint, resharded to `abstract_state`'s shardings; None if none.

    Raises:
      UserError: there are checkpoints, but none is readable, or they belong to another run.
    """
    steps = sorted(self.manager.all_steps(), reverse=True)
    if not steps:
      return None
    for step in steps:
      try:
        meta = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        meta = dict(meta["meta"])
      except Exception as e:  # noqa: BLE001 — any unreadable checkpoint: try the one before.
        logging.warning("checkpoint at step %d is unreadable (%s); trying the previous one.",
                        step, _first_line(e))
        continue
      self._check_same_state(meta, step)
      try:
        restored = self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.PyTreeRestore(
                abstract_state,
                restore_args=ocp.checkpoint_utils.construct_restore_args(abstract_state))))
      except Exception as e:  # noqa: BLE001
        logging.warning("checkpoint at step %d is unreadable (%s); trying the previous one.",
                        step, _first_line(e))
        continue
      return Restored(restored["state"], step, meta)
    raise UserError(f"no checkpoint in {self.manager.directory} can be read (steps "
                    f"{', '.join(map(str, steps))}); move the directory aside to start afresh.")

  def _check_same_state(self, meta: dict, step: int) -> None:
    for key in _SAME_STATE:
      if key in meta and meta[key] != self.meta.get(key):
        raise UserError(f"the checkpoint at step {step} in {self.manager.directory} was written "
                        f"with {key} {meta[key]!r}, but this run has {self.meta.get(key)!r}; use "
                        f"another workdir to start a new run.")

def _state_handler() -> ocp.PyTreeCheckpointHandler:
  """orbax's handler for the state; on CPU devices, without replica-parallel writing.

  By default orbax (off GPUs) has each replica of a replicated array write a slice of it; every
  slice is a small compiled program, one per array shape and sharding (~45 for AlexNet's state:
  about 3 s of CPU in every process that saves, most of what a short run spends saving). XLA:CPU
  devices share their host's memory, so there the slices gain nothing: one replica writes the
  whole array. Elsewhere orbax's defaults stand.
  """
  if jax.default_backend() != "cpu":
    return ocp.PyTreeCheckpointHandler()
  handlers = ocp.type_handlers
  return ocp.PyTreeCheckpointHandler(type_handler_registry=handlers.create_type_handler_registry(
      *[(ty, handlers.get_type_handler(ty)) for ty in handlers.supported_types()
        if ty is not jax.Array],
      (jax.Array, handlers.ArrayHandler(use_replica_parallel=False))))


def _ignore_callbacks_into_closed_event_loops() -> None:
  """Silences tensorstore's late callbacks into orbax's closed event loop.

  When an asynchronous save fails (a full disk), orbax closes the save's event loop while
  tensorstore still completes the other writes of that save from its own threads; each completion
  then raises RuntimeError("Event loop is closed") where nobody can catch it, and Python prints it
  as an unraisable exception — dozens of tracebacks around the one sentence that reports the
  failure. Only that exact error is dropped; every other unraisable exception still goes to the
  hook that was installed before.
  """
  previous = sys.unraisablehook
  if getattr(previous, "ignores_closed_event_loops", False):
    return

  def hook(unraisable):
    error = unraisable.exc_value
    if isinstance(error, RuntimeError) and str(error) == "Event loop is closed":
      return
    previous(unraisable)

  hook.ignores_closed_event_loops = True
  sys.unraisablehook = hook


def _first_line(e: Exception) -> str:
  text = str(e).strip().splitlines()
  return f"{type(e).__name__}: {text[0] if text else ''}"


def read_numpy(checkpoint_dir: str, step: int) -> dict:
  """The state of the checkpoint at `step` as nested dicts of numpy arrays, on any machine.

  For inspection and tests: no mesh, no target structure, whatever topology wrote it.
  """
  path = f"{checkpoint_dir}/{step}/state"
  checkpointer = ocp.PyTreeCheckpointer()
  tree = checkpointer.metadata(path)
  tree = getattr(tree, "item_metadata", tree)
  tree = getattr(tree, "tree", tree)
  as_numpy = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), tree)
  return checkpointer.restore(path, args=ocp.args.PyTreeRestore(restore_args=as_numpy))
