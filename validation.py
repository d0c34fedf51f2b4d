"""The error half of resolving a config (experiment.resolve): one sentence for each rule.

`check_fields` checks each field of a config (configs/default.py) for its type, range or choices;
`check_run` checks the resolved run's combinations — scheme × mesh × model layout × batch ×
backend × optimiser × dataset — through the library's own rules (models, partitioning, schemes,
local SGD), once, before any dataset is read, device configured or checkpoint opened; nothing
after re-checks them. `check_flags` checks main.py's own flags. Each raises one UserError whose
sentence names the field, the value and what is allowed.

What only the machine can tell (enough devices, a dataset prepared on disk, a readable
checkpoint) is checked where it is met, as early as possible: mesh.py, input_pipeline/,
checkpointing.py.
"""

import math
import os
from collections.abc import Callable

import ml_collections

import input_pipeline
from hybrid_parallel import collectives, layers, models, optim, partitioning, schemes
from hybrid_parallel.errors import UserError
from hybrid_parallel.local_sgd import asgd, averaging
from hybrid_parallel.steps import common, variable_batch
from input_pipeline import arrays

Check = Callable[[str, object], None]  # (field, value) -> None, or a UserError.


def _type(value) -> str:
  return type(value).__name__


def integer(minimum: int | None = None) -> Check:
  """An int (not a bool) of at least `minimum`."""

  def check(field, value):
    if isinstance(value, bool) or not isinstance(value, int):
      raise UserError(f"{field} must be an integer, got {value!r} ({_type(value)}).")
    if minimum is not None and value < minimum:
      raise UserError(f"{field} must be at least {minimum}, got {value}.")

  return check


def number(*, low: float | None = None, high: float | None = None, low_open: bool = False,
           high_open: bool = False) -> Check:
  """A finite int or float within [low, high] (either end open as said)."""

  def check(field, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
        value):
      raise UserError(f"{field} must be a finite number, got {value!r}.")
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
      left = "(" if low_open or low is None else "["
      right = ")" if high_open or high is None else "]"
      span = f"{left}{'-∞' if low is None else low}, {'∞' if high is None else high}{right}"
      raise UserError(f"{field} must lie in {span}, got {value}.")

  return check


def boolean(field, value) -> None:
  if not isinstance(value, bool):
    raise UserError(f"{field} must be True or False, got {value!r}.")


def text(field, value) -> None:
  if not isinstance(value, str):
    raise UserError(f"{field} must be a string, got {value!r}.")


def one_of(choices) -> Check:
  """One of `choices` (listed in the sentence when it is not)."""
  choices = tuple(choices)

  def check(field, value):
    if value not in choices:
      raise UserError(f"unknown {field} {value!r}; choose one of "
                      f"{', '.join(map(str, choices))}.")

  return check


def dataset(field, value) -> None:
  """The name's form, and an npz file's presence. A prepared directory is checked when it is
  opened (input_pipeline.load, before anything is written): a config may name where it will be."""
  prepared = input_pipeline.PREPARED
  names = arrays.NAMES + input_pipeline.TFDS_NAMES + (prepared + "DIR",)
  if not isinstance(value, str) or not (arrays.is_array_dataset(value) or
                                        value in input_pipeline.TFDS_NAMES or
                                        value.startswith(prepared)):
    raise UserError(f"unknown {field} {value!r}; choose one of {', '.join(names)}.")
  if value == prepared:
    raise UserError(f"{field} {value!r} names no directory; write {prepared}DIR.")
  path = value[len("npz:"):] if value.startswith("npz:") else None
  if path == "":
    raise UserError(f"{field} {value!r} names no file; write npz:PATH.")
  if path and not os.path.isfile(path):
    raise UserError(f"dataset file {path!r} does not exist.")


def epochs(field, value) -> None:
  """A sequence of epoch numbers, each ≥ 0 (lr_decay_epochs)."""
  if not isinstance(value, (tuple, list)):
    raise UserError(f"{field} must be a tuple of epochs, got {value!r}.")
  for epoch in value:
    number(low=0)(field, epoch)


def multipliers(field, value) -> None:
  """{group: factor > 0} for the groups of optim.GROUPS."""
  for group, factor in dict(value).items():
    if group not in optim.GROUPS:
      raise UserError(f"unknown {field} group {group!r}; the groups are "
                      f"{' and '.join(optim.GROUPS)}.")
    number(low=0, low_open=True)(f"{field}.{group}", factor)


def train_steps(field, value) -> None:
  integer()(field, value)
  if value != -1 and value < 1:
    raise UserError(f"{field} must be -1 (train num_epochs) or at least 1, got {value}.")


# Every field of configs/default.py and its check (tests/validation_test.py checks that none is
# missing).
FIELDS: dict[str, Check] = {
    "model": one_of(models.ARCHITECTURES),
    "image_size": integer(1),
    "dropout_rate": number(low=0, high=1, high_open=True),
    "sync_batch_norm": boolean,
    "dtype": lambda field, value: models.check_dtype(value),
    "tune_xla_cpu": boolean,
    "max_pool": one_of(("auto",) + layers.MAX_POOLS),
    "stem_conv": one_of(("auto",) + layers.STEM_CONVS),
    "grouped_conv": one_of(("auto",) + layers.GROUPED_CONVS),
    "backend": one_of(common.BACKENDS),
    "parallelism": one_of(partitioning.SCHEMES),
    "mesh.data": integer(1),
    "mesh.model": integer(1),
    "owt_variant": one_of(variable_batch.VARIANTS),
    "fc_updates_per_step": integer(1),
    "grad_reduce": one_of(collectives.ALGORITHMS),
    "sync_every": integer(1),
    "average_method": one_of(averaging.METHODS),
    "average_momentum": boolean,
    "n_push": integer(1),
    "n_fetch": integer(1),
    "asgd_stagger": boolean,
    "warm_start_steps": integer(0),
    "dataset": dataset,
    "data_dir": text,
    "tfds_download": boolean,
    "input_workers": integer(0),
    "input_shards": integer(1),
    "shuffle_buffer": integer(1),
    "pca_lighting_std": number(low=0),
    "eval_crops": one_of((1, 10)),
    "global_batch_size": integer(1),
    "microbatches": integer(1),
    "eval_batch_size": integer(1),
    "synthetic_examples": integer(1),
    "synthetic_classes": integer(2),
    "num_epochs": number(low=0, low_open=True),
    "num_train_steps": train_steps,
    "optimizer": one_of(optim.OPTIMIZERS),
    "lars_trust_coefficient": number(low=0, low_open=True),
    "lars_eps": number(low=0),
    "momentum": number(low=0, high=1, high_open=True),
    "nesterov": boolean,
    "weight_decay": number(low=0),
    "base_learning_rate": number(low=0, low_open=True),
    "reference_batch_size": integer(1),
    "lr_scaling": one_of(optim.LR_SCALINGS),
    "warmup_epochs": number(low=0),
    "warmup": one_of(optim.WARMUPS),
    "lr_multipliers": multipliers,
    "lr_decay": one_of(optim.LR_DECAYS),
    "lr_decay_factor": number(low=0, high=1, low_open=True),
    "lr_decay_epochs": epochs,
    "checkpoint_every_steps": integer(0),
    "checkpoint_keep": integer(1),
    "skip_nonfinite_steps": boolean,
    "step_timeout_s": number(low=0),
    "seed": integer(0),
    "log_every_steps": integer(1),
    "eval_every_steps": integer(1),
    "profile_steps": integer(0),
}


def _get(config, field: str):
  value = config
  for key in field.split("."):
    value = value[key]
  return value


def _fields(config, prefix: str = "") -> list[str]:
  """The dotted names of every leaf field of `config`."""
  names = []
  for key, value in config.items():
    if isinstance(value, ml_collections.ConfigDict) and key != "lr_multipliers":
      names += _fields(value, f"{prefix}{key}.")
    else:
      names.append(prefix + key)
  return names


def check_fields(config: ml_collections.ConfigDict) -> None:
  """Raises one UserError for the first field of `config` that is unknown, or of the wrong type,
  range or choice."""
  unknown = sorted(set(_fields(config)) - set(FIELDS))
  if unknown:
    raise UserError(f"the config has no such field: {unknown[0]!r}.")
  for field, check in FIELDS.items():
    check(field, _get(config, field))


def _power_of_two(n: int) -> bool:
  return n & (n - 1) == 0


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
  schemes.check(plan, step, batch_norm=arch.batch_norm,
                sync_batch_norm=run.model.sync_batch_norm, processes=run.processes,
                global_batch=run.global_batch_size)
  if step.grad_reduce == "butterfly":
    for axis, size in (("mesh.data", plan.data), ("mesh.model", plan.model)):
      if not _power_of_two(size):
        raise UserError(f"grad_reduce 'butterfly' needs power-of-two mesh axes, but {axis} is "
                        f"{size}; use ring or tree.")
  if plan.scheme == "averaging":
    averaging.check(run.local_sgd.average_method, plan.data,
                    sync_every=run.local_sgd.sync_every)
  if plan.scheme == "asgd":
    asgd.check(n_push=run.local_sgd.n_push, n_fetch=run.local_sgd.n_fetch,
               warm_start_steps=run.local_sgd.warm_start_steps)
  if run.loop.num_train_steps == -1 and run.schedule.warmup_epochs > run.loop.num_epochs:
    raise UserError(f"warmup_epochs {run.schedule.warmup_epochs} is longer than the run's "
                    f"num_epochs {run.loop.num_epochs}.")
  if run.data.dataset in input_pipeline.TFDS_NAMES:
    _check_tfds(run)
  elif run.data.eval_crops != 1 and not run.data.dataset.startswith(input_pipeline.PREPARED):
    raise UserError(f"eval_crops = {run.data.eval_crops} is ImageNet-style evaluation; dataset "
                    f"{run.data.dataset!r} is evaluated whole (use eval_crops = 1).")


def _check_tfds(run) -> None:
  shards, data = run.data.input_shards, run.data
  if shards % run.processes:
    raise UserError(f"input_shards {shards} cannot be split evenly over {run.processes} "
                    f"processes; use a multiple of {run.processes}.")
  for what in ("global_batch_size", "eval_batch_size"):
    if getattr(run, what) % shards:
      raise UserError(f"{what} {getattr(run, what)} cannot be cut into {shards} input shards; "
                      f"use a multiple of input_shards.")
  if data.eval_crops == 10 and data.dataset not in input_pipeline.IMAGENET_STYLE:
    raise UserError(f"eval_crops = 10 is ImageNet-style evaluation; {data.dataset}'s images "
                    f"are evaluated whole (use eval_crops = 1).")


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
