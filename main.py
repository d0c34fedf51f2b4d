r"""Trains a Krizhevsky convnet with the parallelism scheme a config names.

  python main.py --config=configs/hybrid4.py [--config.num_epochs=5] [--workdir=runs/x]

Started again with the same --workdir, a run goes on from its newest checkpoint; a config that
changes the training (a rate, the momentum, the scheme, ...) is refused there unless
--accept_changes names each changed field (docs/faults.md lists which fields may change).

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
import re
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
_ACCEPT_CHANGES = flags.DEFINE_list(
    "accept_changes", [], "Config fields (comma-separated) this run may change from the run "
    "whose checkpoint in --workdir it goes on from; the changes are logged and noted in "
    "metrics.jsonl. Without it, a restart that changes the training is refused.")
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
    _fail(_unknown_override(argv, e))


def _unknown_override(argv, error: Exception) -> str:
  """The sentence for a --config.FIELD override naming no field: the field as the user wrote
  it, and the fields closest to it (ml_collections's own suggestion misses "batch_szie")."""
  import experiment
  import validation
  # ml_collections nests the KeyError's text inside quotes and exceptions; unwrap it.
  text = error.args[0] if error.args else str(error)
  while isinstance(text, BaseException):
    text = text.args[0] if text.args else str(text)
  key = re.search(r"'([^']+)'", str(text))
  overrides = [arg.split("=", 1)[0][len("--config."):] for arg in argv
               if arg.startswith("--config.")]
  field = next((o for o in overrides if key and o.split(".")[-1] == key.group(1)),
               key.group(1) if key else " ".join(str(text).split()))
  return validation.no_such_field(field, experiment.SETTINGS)


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


def _mesh_that_fits(devices: int, processes: int) -> str:
  """The largest mesh of at most `devices` that the run's config resolves with (its scheme,
  batch and model), the model axis kept where it fits, as the flags that set it."""
  import experiment
  from hybrid_parallel.errors import UserError
  model = _CONFIG.value.mesh.model
  shapes = sorted(((d, m) for d in range(1, devices + 1) for m in range(1, devices // d + 1)),
                  key=lambda shape: (-shape[0] * shape[1], abs(shape[1] - model)))
  verbosity = logging.get_verbosity()
  logging.set_verbosity(logging.ERROR)  # a candidate's warnings are not the run's.
  try:
    for data, model in shapes:
      config = _CONFIG.value.copy_and_resolve_references()
      with config.unlocked():
        config.mesh.data, config.mesh.model = data, model
      try:
        experiment.resolve(config, processes=processes)
      except UserError:
        continue
      return f"--config.mesh.data={data} --config.mesh.model={model}"
  finally:
    logging.set_verbosity(verbosity)
  return "none that this config resolves with"


def _check_cpu_devices(spec) -> None:
  """One UserError where --cpu_devices simulates fewer CPU devices than the mesh needs on a
  machine where the CPU runs it (no accelerator, or JAX_PLATFORMS=cpu), before JAX starts."""
  from hybrid_parallel import accelerators
  from hybrid_parallel.errors import UserError
  mesh = spec.plan.data * spec.plan.model
  per_process = max(1, mesh // spec.processes)
  asked = _CPU_DEVICES.value
  if not asked or asked >= per_process:
    return
  if not (os.environ.get("JAX_PLATFORMS") == "cpu" or accelerators.only_the_cpu_can_run()):
    return  # accelerators run it, or refuse it themselves (mesh.cpu_stands_in).
  each = " per process" if spec.processes > 1 else ""
  fits = asked * spec.processes
  raise UserError(f"the {spec.plan.data}×{spec.plan.model} mesh needs {mesh} devices, but "
                  f"--cpu_devices={asked} simulates {asked} CPU "
                  f"device{'s' if asked > 1 else ''}{each}: set --cpu_devices={per_process} (or "
                  f"leave it out: the CPU then simulates what the mesh needs), or choose a mesh "
                  f"that fits {fits} device{'s' if fits > 1 else ''}: "
                  f"{_mesh_that_fits(fits, spec.processes)}.")


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
    validation.check_accepted(_ACCEPT_CHANGES.value, experiment.SETTINGS)
    _check_cpu_devices(spec)
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
    train.train_and_evaluate(spec, workdir, accept_changes=_ACCEPT_CHANGES.value)
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
