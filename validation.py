"""The error half of resolving a config (experiment.resolve): the checks of the config as a whole.

`check_fields` runs each field's own check — declared beside the field in the RunSpec's parts
(experiment.py), from hybrid_parallel/checks.py or below — and refuses unknown and missing
fields; `check_run` checks the resolved run's combinations — scheme × mesh × model layout ×
batch × backend × optimiser × dataset — through the library's own rules (models, partitioning,
schemes, collectives, local SGD, input_pipeline), before any dataset is read, device configured
or checkpoint opened. The library applies the same rules where it is called directly (a mesh
size, a model name, an algorithm), so a rule is written once and met twice at most. `check_flags`
checks main.py's own flags. Each raises one UserError whose sentence names the field, the value
and what is allowed. `warnings` names what runs but has been measured not to learn.

What only the machine can tell (enough devices, a dataset prepared on disk, a readable
checkpoint, the real process count) is checked where it is met, as early as possible: mesh.py,
input_pipeline/, checkpointing.py, train.py.
"""

import os

import ml_collections

import input_pipeline
from hybrid_parallel import checks, local_sgd, models, optim, partitioning, schemes
from hybrid_parallel.local_sgd import asgd
from hybrid_parallel.checks import Check
from hybrid_parallel.errors import UserError


def epochs(field, value) -> None:
  """A sequence of epoch numbers, each ≥ 0 (lr_decay_epochs)."""
  if not isinstance(value, (tuple, list)):
    raise UserError(f"{field} must be a tuple of epochs, got {value!r}.")
  for epoch in value:
    checks.number(low=0)(field, epoch)


def train_steps(field, value) -> None:
  checks.integer()(field, value)
  if value != -1 and value < 1:
    raise UserError(f"{field} must be -1 (train num_epochs) or at least 1, got {value}.")


def value(config: ml_collections.ConfigDict, field: str):
  """The value of the config field `field` (a dotted name such as "mesh.data")."""
  for key in field.split("."):
    config = config[key]
  return config


def fields(config: ml_collections.ConfigDict, settings: dict[str, Check],
           prefix: str = "") -> list[str]:
  """The dotted names of the fields of `config`: its leaves, and the groups `settings` declares
  as one field (lr_multipliers)."""
  names = []
  for key, item in config.items():
    name = prefix + key
    if isinstance(item, ml_collections.ConfigDict) and name not in settings:
      names += fields(item, settings, f"{name}.")
    else:
      names.append(name)
  return names


def check_fields(config: ml_collections.ConfigDict, settings: dict[str, Check]) -> None:
  """Raises one UserError for the first field of `config` that is unknown, missing, or of the
  wrong type, range or choice.

  Args:
    config: the run's config.
    settings: {field: its check} for every field a config has (experiment.SETTINGS).
  """
  present = fields(config, settings)
  unknown = sorted(set(present) - set(settings))
  if unknown:
    raise UserError(f"the config has no such field: {unknown[0]!r}.")
  missing = [field for field in settings if field not in present]
  if missing:
    raise UserError(f"the config has no field {missing[0]!r}; start it from "
                    f"configs/default.py's get_config(), which sets every field.")
  for field, check in settings.items():
    check(field, value(config, field))


def check_run(run) -> None:
  """Raises one UserError for the first combination of a resolved run (experiment.RunSpec) that
  cannot work."""
  plan, step = run.plan, run.step
  if (plan.data * plan.model) % run.processes:
    raise UserError(f"the {plan.data}×{plan.model} mesh cannot be split evenly over "
                    f"{run.processes} processes.")
  arch = models.ARCHITECTURES[run.model.name]
  models.check_layout(run.model.name, arch, plan.layout, image_size=run.image_size)
  partitioning.check_batch(plan, run.global_batch_size, microbatches=step.microbatches)
  partitioning.check_batch(plan, run.eval_batch_size, what="eval_batch_size")
  if run.loop.probe_examples:
    partitioning.check_batch(plan, run.loop.probe_examples, what="probe_examples")
    if not input_pipeline.arrays.is_array_dataset(run.data.dataset):
      raise UserError(f"probe_examples needs a dataset held in memory (digits, synthetic or "
                      f"npz:PATH), got dataset {run.data.dataset!r}; set probe_examples = 0.")
  schemes.check(plan, step, batch_norm=arch.batch_norm,
                sync_batch_norm=run.model.sync_batch_norm, processes=run.processes,
                global_batch=run.global_batch_size)
  if plan.local_sgd:
    local_sgd.SCHEMES[plan.scheme].check(run.local_sgd, plan.data)
    order = getattr(run.local_sgd, "asgd_data_order", "own")
    if order != "own" and not input_pipeline.arrays.is_array_dataset(run.data.dataset):
      raise UserError(f"asgd_data_order {order!r} needs a dataset held in memory (digits, "
                      f"synthetic or npz:PATH), got dataset {run.data.dataset!r}; set "
                      f"asgd_data_order = 'own'.")
  if run.loop.num_train_steps == -1 and run.schedule.warmup_epochs > run.loop.num_epochs:
    raise UserError(f"warmup_epochs {run.schedule.warmup_epochs} is longer than the run's "
                    f"num_epochs {run.loop.num_epochs}.")
  input_pipeline.check_eval_crops(run.data.dataset, run.data.eval_crops)
  if run.data.dataset in input_pipeline.TFDS_NAMES:
    input_pipeline.check_input_shards(run.data.input_shards, processes=run.processes,
                                      global_batch_size=run.global_batch_size,
                                      eval_batch_size=run.eval_batch_size)


def warnings(run) -> list[str]:
  """One sentence for each part of a resolved run that is valid but was measured not to learn
  (A-SGD beyond a collapse of docs/asynchronous.md's sweep)."""
  if run.plan.scheme != "asgd":
    return []
  schedule = run.schedule
  rate = optim.peak_learning_rate(schedule.base_learning_rate, run.global_batch_size,
                                  reference_batch=schedule.reference_batch_size,
                                  scaling=schedule.lr_scaling)
  rate *= max(run.optimizer.lr_multipliers.values())
  warning = asgd.collapse_warning(run.local_sgd, run.plan.data, learning_rate=rate,
                                  momentum=run.optimizer.momentum)
  return [warning] if warning else []


def check_flags(*, workdir: str, cpu_devices: int | None, coordinator_address: str | None,
                num_processes: int | None, process_id: int | None, distributed: bool,
                heartbeat_timeout_s: int) -> None:
  """Raises one UserError for main.py flags that cannot work together."""
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise UserError(f"--workdir {workdir!r} is a file, not a directory.")
  existing = os.path.abspath(workdir)
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing) or not os.access(existing, os.W_OK | os.X_OK):
    raise UserError(f"--workdir {workdir!r} cannot be created: {existing!r} is not a writable "
                    f"directory.")
  if cpu_devices is not None and cpu_devices < 1:
    raise UserError(f"--cpu_devices must be at least 1, got {cpu_devices}.")
  if heartbeat_timeout_s < 1:
    raise UserError(f"--heartbeat_timeout_s must be at least 1, got {heartbeat_timeout_s}.")
  given = {"--coordinator_address": coordinator_address, "--num_processes": num_processes,
           "--process_id": process_id}
  if any(v is not None for v in given.values()):
    missing = [name for name, v in given.items() if v is None]
    if missing:
      raise UserError(f"{', '.join(n for n, v in given.items() if v is not None)} needs "
                      f"{' and '.join(missing)} too.")
    if distributed:
      raise UserError("--distributed reads the processes from the environment; give it or "
                      "--coordinator_address, not both.")
    if num_processes < 1:
      raise UserError(f"--num_processes must be at least 1, got {num_processes}.")
    if not 0 <= process_id < num_processes:
      raise UserError(f"--process_id must lie in [0, {num_processes - 1}] for --num_processes "
                      f"{num_processes}, got {process_id}.")
    if ":" not in coordinator_address:
      raise UserError(f"--coordinator_address must be HOST:PORT, got {coordinator_address!r}.")
