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

import difflib
import json
import os
import tempfile

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


def no_such_field(name: str, fields) -> str:
  """The sentence for an unknown config field `name`, with "did you mean" naming the fields of
  `fields` (dotted config names) closest to it, where one is close. A field matches on its whole name or on a run of
  its words ("batch_szie" finds global_batch_size and eval_batch_size, "dropout" dropout_rate);
  among equal matches, those closest as a whole come first."""

  def ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()

  def closeness(field: str) -> tuple[float, float]:
    words = field.replace(".", "_").split("_")
    runs = {"_".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)}
    return max(ratio(name, run) for run in runs | {field}), ratio(name, field)

  scores = {field: closeness(field) for field in fields}
  best = max((part for part, _ in scores.values()), default=0.0)
  if best < 0.75:  # below this, difflib pairs unrelated words ("seed" and "mesh.model").
    return f"the config has no such field: {name!r}."
  close = sorted((f for f, (part, _) in scores.items() if part == best),
                 key=lambda f: -scores[f][1])
  if scores[close[0]][1] >= 0.85:  # one field is close as a whole: it alone.
    close = close[:1]
  return (f"the config has no such field: {name!r}; did you mean "
          f"{' or '.join(map(repr, close[:3]))}?")


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
    raise UserError(no_such_field(unknown[0], settings))
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
  input_pipeline.check_decoded_placement(run.data.dataset, run.data.decoded_placement,
                                         data=plan.data)
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


def _can_write_in(directory: str) -> bool:
  """Whether a directory can be made in `directory`, found by making (and removing) one:
  os.access answers yes to root (Colab and Docker users) for /proc and read-only mounts too."""
  try:
    os.rmdir(tempfile.mkdtemp(prefix=".workdir_check_", dir=directory))
  except OSError:
    return False
  return True


def check_flags(*, workdir: str, cpu_devices: int | None, coordinator_address: str | None,
                num_processes: int | None, process_id: int | None, distributed: bool,
                heartbeat_timeout_s: int) -> None:
  """Raises one UserError for main.py flags that cannot work together."""
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise UserError(f"--workdir {workdir!r} is a file, not a directory.")
  existing = os.path.abspath(workdir)
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing) or not _can_write_in(existing):
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


# The config fields a restart may change and still continue the same run (docs/faults.md): how
# long it trains, what it writes and how often, how its steps are computed (the backends, the
# all-reduce algorithms and layers.py's choices give the same numbers to rounding), where and how
# its data are read, and what a fault does. Every other field changes the training.
RESTART_MAY_CHANGE = frozenset({
    "num_epochs", "num_train_steps", "log_every_steps", "eval_every_steps", "eval_batch_size",
    "checkpoint_every_steps", "checkpoint_keep", "profile_steps", "probe_examples",
    "step_timeout_s", "skip_nonfinite_steps", "backend", "grad_reduce", "tune_xla_cpu",
    "max_pool", "stem_conv", "grouped_conv", "data_dir", "tfds_download", "input_workers",
    "decoded_placement"})
# Fields whose change gives the training state other shapes: a checkpoint cannot continue with
# them changed, even when asked.
_STATE_SHAPE = ("model", "image_size", "optimizer", "fc_updates_per_step", "synthetic_classes")
# What checkpoints written before the resolved config was recorded hold of it.
_RECORDED_BEFORE = ("model", "dataset", "image_size", "input_shards", "seed", "global_batch_size",
                    "optimizer", "fc_updates_per_step")


def check_accepted(names, fields) -> None:
  """Raises one UserError for a name in `names` (--accept_changes) that is no config field of
  `fields` (dotted names) nor a group of them ("mesh", "lr_multipliers")."""
  for name in names:
    if not any(field == name or field.startswith(f"{name}.") for field in fields):
      raise UserError(f"--accept_changes: {no_such_field(name, fields)}")


def _accepted(field: str, names) -> bool:
  return any(field == name or field.startswith(f"{name}.") for name in names)


def _shown(value) -> str:
  return json.dumps(value) if isinstance(value, (dict, list)) else repr(value)


def restart_changes(written: dict, current: dict, *, accepted=(), where: str) -> dict:
  """The config fields a restart changes, asked for in `accepted`; one UserError where it changes
  another field that changes the training (module constants).

  Args:
    written: the meta item of the checkpoint the run continues from (its "config": {dotted
      field: value}; older checkpoints hold `_RECORDED_BEFORE`'s fields at the top).
    current: this run's {dotted field: value} (experiment.RunSpec.config_values).
    accepted: the fields (or groups) the user asked to change (main.py --accept_changes).
    where: the checkpoint, as the sentence names it ("the checkpoint at step 10 in runs/x").

  Returns:
    {field: (written value, this run's)} of the accepted changes that change the training.
  """
  recorded = written.get("config") or {k: written[k] for k in _RECORDED_BEFORE if k in written}
  current = json.loads(json.dumps(current))  # as recorded: tuples are lists.
  changed = {field: (recorded[field], current[field]) for field in recorded
             if field in current and recorded[field] != current[field]
             and field not in RESTART_MAY_CHANGE}
  replicas = [partitioning.SCHEMES[scheme].local_sgd
              for scheme in (recorded.get("parallelism"), current.get("parallelism"))
              if scheme in partitioning.SCHEMES]
  shape = [f for f in changed if f in _STATE_SHAPE or (
      any(replicas) and f in ("parallelism", "mesh.data")) or (
      f == "momentum" and 0 in changed[f] and any(changed[f]))]  # a trace, or none.
  refused = [f for f in changed if not _accepted(f, accepted)]
  listed = lambda fields, side: checks.listing(f"{f} {_shown(changed[f][side])}" for f in fields)
  if shape:
    raise UserError(f"{where} was written by a run with {listed(shape, 0)}, but this run has "
                    f"{listed(shape, 1)}, and its training state cannot take that checkpoint's "
                    f"shapes; use another --workdir to start a new run, or put the "
                    f"value{'s' if len(shape) > 1 else ''} back to continue that one.")
  if refused:
    values = "values" if len(refused) > 1 else "value"
    raise UserError(f"{where} was written by a run with {listed(refused, 0)}, but this run has "
                    f"{listed(refused, 1)}; use another --workdir to start a new run, or put "
                    f"the {values} back to continue that one (or continue it with the "
                    f"{'changes' if len(refused) > 1 else 'change'} recorded in metrics.jsonl: "
                    f"--accept_changes={','.join(refused)}).")
  return changed
