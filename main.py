r"""Trains a Krizhevsky convnet with the parallelism scheme a config names.

  python main.py --config=configs/hybrid4.py [--config.num_epochs=5] [--workdir=runs/x]

On a machine without an accelerator the mesh runs on simulated CPU devices (exactly as many as it
needs, unless --cpu_devices says otherwise). Where the accelerators are too few for the mesh the
run is refused, unless --cpu_devices=N asks for simulated CPU devices to stand in for them.

Many processes (jax.distributed; one per host, or several on one host):

  python main.py --config=... --coordinator_address=HOST:PORT --num_processes=N --process_id=I

or, under SLURM / Open MPI / on TPU pods, just --distributed (JAX detects the rest). Every process
runs the same command; process 0 writes logs, metrics and TensorBoard; checkpoints are written by
all of them into --workdir, which must be a path they all share.
"""

import json
import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None,
                               "Where metrics and TensorBoard events go; default runs/<config>.")
_CPU_DEVICES = flags.DEFINE_integer(
    "cpu_devices", None, "Simulate this many CPU devices and let them stand in for accelerators "
    "too few for the mesh; default: as many as the mesh needs, where no accelerator is present.")
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None, "HOST:PORT of process 0, for jax.distributed (many processes).")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Processes in the job.")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's index, 0-based.")
_DISTRIBUTED = flags.DEFINE_bool(
    "distributed", False, "Initialise jax.distributed from the environment (SLURM, Open MPI, TPU).")
_HEARTBEAT_S = flags.DEFINE_integer(
    "heartbeat_timeout_s", 60, "jax.distributed ends the job when a process is silent this long.")
_DRY_RUN = flags.DEFINE_bool(
    "dry_run", False, "Check the flags and the config, print the run they describe (JSON) and "
    "exit, touching no device, dataset or workdir.")
flags.mark_flag_as_required("config")


def _fail(message: str) -> None:
  """Reports bad input in one sentence and exits 1 (a traceback would bury the sentence)."""
  print(f"error: {message}", file=sys.stderr)
  sys.exit(1)


def _parse_flags(argv):
  """absl's flag parsing, with config-file and config-override mistakes reported in one line."""
  try:
    argv = flags.FLAGS(argv)
    _ = _CONFIG.value.mesh  # ml_collections defers a file's load error to the first access.
    return argv
  except flags.Error as e:
    _fail(str(e))
  except OSError as e:  # ml_collections could not load the config file.
    cause = str(e.__cause__ or e).strip().splitlines()[-1].strip()
    _fail(f"the config file could not be loaded: {cause}.")
  except (KeyError, AttributeError) as e:  # --config.FIELD names no field of the config.
    # ml_collections nests the KeyError's text (and a "did you mean") inside quotes; unwrap it.
    text = e.args[0] if e.args else str(e)
    while isinstance(text, BaseException):
      text = text.args[0] if text.args else str(text)
    _fail(f"the config has no such field: {' '.join(str(text).split())}")


# Where a job launcher puts the process's rank and the job's size (what jax.distributed's own
# detection reads for SLURM, Open MPI and MPICH's PMI).
_LAUNCHERS = (("SLURM_PROCID", "SLURM_NTASKS"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
              ("PMI_RANK", "PMI_SIZE"))


def _initialize_distributed(jax) -> tuple[int, int] | None:
  """jax.distributed.initialize with timeouts that end a job whose peer is gone; returns this
  process's index and the job's process count without starting a backend — from the flags, or
  from the launcher's environment — or None where neither says (a TPU pod: JAX asks the TPU's
  metadata, and the CPU device count does not matter there)."""
  explicit = (_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value)
  try:
    jax.distributed.initialize(*explicit if _COORDINATOR.value else (None, None, None),
                               initialization_timeout=120,
                               heartbeat_timeout_seconds=_HEARTBEAT_S.value)
  except Exception as e:  # noqa: BLE001 — a coordinator that cannot be reached, bad ids, ...
    _fail(f"jax.distributed could not start ({str(e).strip().splitlines()[0]}).")
  # jax.process_count() would start the backends, which must wait for the CPU device count.
  if _COORDINATOR.value:
    job = (_PROCESS_ID.value, _NUM_PROCESSES.value)
  else:
    job = next(((int(os.environ[rank]), int(os.environ[size])) for rank, size in _LAUNCHERS
                if rank in os.environ and size in os.environ), None)
  if job:
    logging.info("process %d of %d.", *job)
  return job


def _resolved_for(job: tuple[int, int], spec):
  """The run resolved again for the job's process count where it differs (--distributed: only
  now is it known): the checks that need it — the mesh over the processes, input shards, pmap —
  run before any work."""
  import experiment
  from hybrid_parallel.errors import UserError
  index, count = job
  if count == spec.processes:
    return spec
  try:
    return experiment.resolve(_CONFIG.value, processes=count)
  except UserError as e:
    _fail(f"process {index} of {count}: {e}")


def _workdir(config_flag) -> str:
  """--workdir, or runs/<the config file's name>."""
  if _WORKDIR.value:
    return _WORKDIR.value
  name = os.path.splitext(os.path.basename(config_flags.get_config_filename(config_flag)))[0]
  return os.path.join("runs", name)


def _devices_planned(spec) -> str:
  """Where the run's mesh will run, said without starting a backend (a dry run touches no
  device): the machine is probed as JAX probes it before opening an accelerator."""
  from hybrid_parallel import accelerators
  mesh = spec.plan.data * spec.plan.model
  simulated = _CPU_DEVICES.value or max(1, mesh // spec.processes)
  if os.environ.get("JAX_PLATFORMS") == "cpu" or accelerators.only_the_cpu_can_run():
    return f"{simulated} simulated CPU device(s) per process: JAX runs on the CPU here."
  if _CPU_DEVICES.value:
    return (f"this machine's accelerators, or {simulated} simulated CPU devices standing in "
            f"where they are fewer than {mesh} (--cpu_devices).")
  return (f"this machine's accelerators; refused when the run starts if they are fewer than "
          f"{mesh} (--cpu_devices=N asks for CPU stand-ins).")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  # Every flag and config field is checked, and the config resolved into the run it describes,
  # before anything else happens: no device is set up, no dataset read and nothing in the
  # workdir touched for a run that cannot work.
  import experiment
  import validation
  from hybrid_parallel.errors import UserError
  workdir = _workdir(flags.FLAGS["config"])
  try:
    validation.check_flags(workdir=workdir, cpu_devices=_CPU_DEVICES.value,
                           coordinator_address=_COORDINATOR.value,
                           num_processes=_NUM_PROCESSES.value, process_id=_PROCESS_ID.value,
                           distributed=_DISTRIBUTED.value, heartbeat_timeout_s=_HEARTBEAT_S.value)
    # With --distributed the process count comes from the environment once jax.distributed is
    # up; until then the run is checked for one.
    spec = experiment.resolve(_CONFIG.value, processes=_NUM_PROCESSES.value or 1)
  except UserError as e:
    _fail(str(e))
  if _DRY_RUN.value:
    print(json.dumps({"workdir": workdir, **spec.describe(), "devices": _devices_planned(spec)},
                     indent=1))
    return
  import jax
  job = _initialize_distributed(jax) if _COORDINATOR.value or _DISTRIBUTED.value else None
  if job:  # the platform is chosen after it.
    spec = _resolved_for(job, spec)
  mesh = spec.plan.data * spec.plan.model
  from hybrid_parallel import platforms
  # Each process simulates its share of the mesh where the CPU runs it; stand-ins for
  # accelerators only where --cpu_devices asks for them.
  platforms.start(cpu_devices=_CPU_DEVICES.value, simulate_on_cpu=max(1, mesh // spec.processes))
  if (_COORDINATOR.value or _DISTRIBUTED.value) and not job:  # JAX alone knew the job.
    spec = _resolved_for((jax.process_index(), jax.process_count()), spec)
  import train  # Imported after the device count is set: nothing may query devices earlier.
  if jax.process_count() > 1:
    logging.info("process %d of %d: %d local devices of %d.", jax.process_index(),
                 jax.process_count(), jax.local_device_count(), jax.device_count())
  from hybrid_parallel import faults

  if jax.default_backend() == "cpu" and mesh > 1:
    logging.info("JAX runs on the CPU: simulating %d CPU devices for the %d×%d mesh.",
                 jax.device_count(), spec.plan.data, spec.plan.model)
  try:
    train.train_and_evaluate(spec, workdir)
  except faults.Stopped as e:
    sys.exit(e.exit_code)  # the loop has said what it saved.
  except KeyboardInterrupt:  # Ctrl-C before the loop took the signal over: nothing to save.
    print("error: interrupted before the first step; nothing was saved.", file=sys.stderr)
    sys.exit(130)
  except (UserError, FloatingPointError) as e:
    _fail(str(e))
  except jax.errors.JaxRuntimeError as e:
    if "RESOURCE_EXHAUSTED" in str(e):  # the machine's limit, not a bug: what to change.
      from hybrid_parallel import errors
      print(f"error: {errors.out_of_memory(str(e))}", file=sys.stderr, flush=True)
      os._exit(1)  # with many processes, the others are in a collective with this one.
    if jax.process_count() == 1:
      raise
    # A peer died mid-collective. Exit now: JAX's exit handler would wait for the dead peer at
    # its shutdown barrier until the heartbeat timeout and then abort.
    cause = str(e).strip().splitlines()[0]
    print(f"error: process {jax.process_index()} of {jax.process_count()}: a collective with "
          f"the other processes failed ({cause}); another process has probably died, see its "
          f"log.", file=sys.stderr, flush=True)
    os._exit(1)


if __name__ == "__main__":
  app.run(main, flags_parser=_parse_flags)
