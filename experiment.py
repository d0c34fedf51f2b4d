"""A config made into a run: resolved once into a typed description, then built into the library's
objects (plan, mesh, model, optimiser, scheme and steps).

`resolve(config)` is the one place that reads a config: it checks every field and every
combination, touches no device, and returns a frozen `RunSpec`. Everything after takes the
RunSpec — `build` the objects, `load_dataset` the data, `feed` the steps with it, train.py the
loop. This is where a `ConfigDict` stops: `hybrid_parallel` and `input_pipeline` take the values
they use as arguments (and apply the same rules, hybrid_parallel/checks.py, to what they are
given).

Each config field is declared once, as a field of a part of the RunSpec with its check beside it
(`checks.setting`; StepOptions's in steps/common.py): a new field is that one line and its
default in configs/default.py. `SETTINGS`, the checks of every field, is read off the parts.
"""

import dataclasses
import math
import time
import types

import jax
import ml_collections
import numpy as np
import optax
from absl import logging
from jax.sharding import NamedSharding

import input_pipeline
import validation
from input_pipeline import decoded as decoded_input
from hybrid_parallel import compiler_options, layers, models, optim, partitioning, schemes
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel.checks import boolean, declared_settings, integer, number, one_of, setting
from hybrid_parallel.checks import text
from hybrid_parallel.errors import UserError
from hybrid_parallel import local_sgd as local_sgd_schemes
from hybrid_parallel.local_sgd import asgd, averaging
from hybrid_parallel.steps import explicit
from hybrid_parallel.steps.common import StepOptions

_FRACTION = number(low=0, high=1, high_open=True)  # [0, 1): dropout, momentum.
_POSITIVE = number(low=0, low_open=True)
_NON_NEGATIVE = number(low=0)


@dataclasses.dataclass(frozen=True)
class MeshChoice:
  """The scheme and the mesh it runs on (`partitioning.make_plan`)."""
  parallelism: str = setting(one_of(partitioning.SCHEMES))
  data: int = setting(integer(1), config="mesh.data")
  model: int = setting(integer(1), config="mesh.model")


@dataclasses.dataclass(frozen=True)
class ModelChoice:
  """The network and how it is computed (`models.build`; "auto" settings are resolved for the
  platform when the run is built)."""
  name: str = setting(one_of(models.ARCHITECTURES), config="model")
  dropout_rate: float = setting(_FRACTION)
  sync_batch_norm: bool = setting(boolean)
  dtype: str = setting(models.check_dtype)
  max_pool: str = setting(one_of(("auto",) + layers.MAX_POOLS))
  stem_conv: str = setting(one_of(("auto",) + layers.STEM_CONVS))
  grouped_conv: str = setting(one_of(("auto",) + layers.GROUPED_CONVS))


@dataclasses.dataclass(frozen=True)
class OptimizerChoice:
  """`optim.make_optimizer`'s settings (its keyword arguments, by name)."""
  optimizer: str = setting(one_of(optim.OPTIMIZERS))
  momentum: float = setting(_FRACTION)
  nesterov: bool = setting(boolean)
  weight_decay: float = setting(_NON_NEGATIVE)
  lars_trust_coefficient: float = setting(_POSITIVE)
  lars_eps: float = setting(_NON_NEGATIVE)
  lr_multipliers: types.MappingProxyType = setting(optim.check_multipliers)


@dataclasses.dataclass(frozen=True)
class ScheduleChoice:
  """The learning rate per step (optim.py: scaling rule, warmup, decay)."""
  base_learning_rate: float = setting(_POSITIVE)
  reference_batch_size: int = setting(integer(1))
  lr_scaling: str = setting(one_of(optim.LR_SCALINGS))
  warmup_epochs: float = setting(_NON_NEGATIVE)
  warmup: str = setting(one_of(optim.WARMUPS))
  lr_decay: str = setting(one_of(optim.LR_DECAYS))
  lr_decay_factor: float = setting(number(low=0, high=1, low_open=True))
  lr_decay_epochs: tuple[float, ...] = setting(validation.epochs)


@dataclasses.dataclass(frozen=True)
class DataChoice:
  """Where the examples come from (`input_pipeline.load`)."""
  dataset: str = setting(input_pipeline.check_name)
  data_dir: str = setting(text)
  tfds_download: bool = setting(boolean)
  input_workers: int = setting(integer(0))
  decoded_placement: str = setting(one_of(input_pipeline.DECODED_PLACEMENTS))
  input_shards: int = setting(integer(1))
  shuffle_buffer: int = setting(integer(1))
  pca_lighting_std: float = setting(_NON_NEGATIVE)
  eval_crops: int = setting(one_of(input_pipeline.EVAL_CROPS))
  synthetic_examples: int = setting(integer(1))
  synthetic_classes: int = setting(integer(2))


@dataclasses.dataclass(frozen=True)
class LoopChoice:
  """How long the loop trains and what it writes on the way (train.py)."""
  num_epochs: float = setting(_POSITIVE)
  num_train_steps: int = setting(validation.train_steps)
  log_every_steps: int = setting(integer(1))
  eval_every_steps: int = setting(integer(1))
  checkpoint_every_steps: int = setting(integer(0))
  checkpoint_keep: int = setting(integer(1))
  step_timeout_s: float = setting(_NON_NEGATIVE)
  profile_steps: int = setting(integer(0))
  probe_examples: int = setting(integer(0))


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """Everything a run of one config is, checked (`resolve`)."""
  plan: partitioning.Plan  # from the MeshChoice.
  processes: int  # how many processes run it (jax.distributed).
  seed: int = setting(integer(0))
  image_size: int = setting(integer(1))
  global_batch_size: int = setting(integer(1))
  eval_batch_size: int = setting(integer(1))
  model: ModelChoice
  step: StepOptions
  optimizer: OptimizerChoice
  schedule: ScheduleChoice
  data: DataChoice
  loop: LoopChoice
  # The local-SGD schemes' meetings (local_sgd.averaging.Settings, local_sgd.asgd.Settings).
  local_sgd: averaging.Settings | asgd.Settings | None

  def describe(self) -> dict:
    """The run as plain values (what `main.py --dry_run` prints)."""
    plan = self.plan
    return {"scheme": plan.scheme, "mesh": f"{plan.data}x{plan.model}",
            **{k: v for k, v in _plain(self).items() if k != "plan"}}

  def config_values(self) -> dict:
    """The resolved run as {config field (dotted): value}, JSON-ready: what a checkpoint records
    of the run that wrote it, and what a restart is compared with (validation.restart_changes).
    The fields of the local-SGD schemes' meetings appear where the scheme has them."""
    values = {"parallelism": self.plan.scheme, "mesh.data": self.plan.data,
              "mesh.model": self.plan.model}
    parts = (self, self.model, self.step, self.optimizer, self.schedule, self.data, self.loop,
             self.local_sgd)
    for part in filter(None, parts):
      for field in dataclasses.fields(part):
        if "check" in field.metadata:
          values[field.metadata["config"] or field.name] = _plain(getattr(part, field.name))
    return values


# The dataclasses whose fields declare the config fields (`setting`), and what they declare.
PARTS = (RunSpec, MeshChoice, ModelChoice, StepOptions, OptimizerChoice, ScheduleChoice,
         DataChoice, LoopChoice, averaging.Settings, asgd.Settings)
SETTINGS = {field: check for part in PARTS for field, check in declared_settings(part).items()}


def _settings(part) -> dict:
  """A part's fields by name (shallow: dataclasses.asdict would deep-copy its mappings)."""
  return {f.name: getattr(part, f.name) for f in dataclasses.fields(part)}


def _plain(value):
  """`value` as JSON-ready values."""
  if dataclasses.is_dataclass(value):
    return _plain(_settings(value))
  if isinstance(value, (dict, types.MappingProxyType)):
    return {k: _plain(v) for k, v in value.items()}
  if isinstance(value, (tuple, list)):
    return [_plain(v) for v in value]
  return value


def _frozen(value):
  """A config value as a RunSpec holds it: sequences as tuples, dicts read-only."""
  if isinstance(value, ml_collections.ConfigDict):
    value = value.to_dict()
  if isinstance(value, dict):
    return types.MappingProxyType({k: _frozen(v) for k, v in value.items()})
  if isinstance(value, (list, tuple)):
    return tuple(_frozen(v) for v in value)
  return value


def _read(cls, config: ml_collections.ConfigDict, **others):
  """An instance of the dataclass `cls`: each field declared with `setting` read from its config
  field, the others from `others`."""
  values = {field.name: _frozen(validation.value(config, field.metadata["config"] or field.name))
            for field in dataclasses.fields(cls) if "check" in field.metadata}
  return cls(**values, **others)


def resolve(config: ml_collections.ConfigDict, *, processes: int = 1) -> RunSpec:
  """The run `config` describes, every field and combination checked; touches no device.

  Args:
    config: the run's config (configs/default.py describes every field).
    processes: how many processes will run it (jax.distributed).

  Raises:
    UserError: one sentence naming the first field or combination that cannot work.
  """
  validation.check_fields(config, SETTINGS)
  mesh = _read(MeshChoice, config)
  plan = partitioning.make_plan(mesh.parallelism, mesh.data, mesh.model)
  local_sgd = local_sgd_schemes.SCHEMES[plan.scheme].Settings if plan.local_sgd else None
  run = _read(RunSpec, config, plan=plan, processes=processes,
              model=_read(ModelChoice, config), step=_read(StepOptions, config),
              optimizer=_read(OptimizerChoice, config), schedule=_read(ScheduleChoice, config),
              data=_read(DataChoice, config), loop=_read(LoopChoice, config),
              local_sgd=_read(local_sgd, config) if local_sgd else None)
  validation.check_run(run)
  for warning in validation.warnings(run):
    logging.warning("%s", warning)
  return run


@dataclasses.dataclass
class Experiment:
  """Everything a run is made of on its devices (see `build`)."""
  spec: RunSpec
  mesh: jax.sharding.Mesh
  model: models.Network
  tx: optax.GradientTransformation
  schedule: optax.Schedule
  scheme: schemes.Scheme
  eval_step: object  # (variables, images, labels, weights) -> sums; see steps.explicit.

  @property
  def plan(self) -> partitioning.Plan:
    return self.spec.plan

  @property
  def batch_sharding(self) -> NamedSharding:
    """How a global batch of images or labels is laid out on the mesh."""
    return NamedSharding(self.mesh, self.plan.batch_spec)


def load_dataset(spec: RunSpec):
  """The input pipeline's source for the run's data (input_pipeline.load), what every process
  read of it agreed. A decoded set's placement is not decided yet: `feed` decides it, with the
  run built. Processes that read different sets are a UserError."""
  data = spec.data
  source = input_pipeline.load(
      data.dataset, image_size=spec.image_size, seed=spec.seed,
      synthetic_examples=data.synthetic_examples, synthetic_classes=data.synthetic_classes,
      data_dir=data.data_dir or None, download=data.tfds_download,
      input_shards=data.input_shards, shuffle_buffer=data.shuffle_buffer,
      pca_lighting_std=data.pca_lighting_std, eval_crops=data.eval_crops,
      input_workers=data.input_workers, decoded_placement=data.decoded_placement)
  input_pipeline.check_same_everywhere(source)
  if isinstance(spec.local_sgd, asgd.Settings) and spec.local_sgd.asgd_data_order != "own":
    # Lock-step clients fed as a drawn run (asgd.py): each client's rows of its own step.
    total = steps_to_train(spec, input_pipeline.steps_per_epoch(source, spec.global_batch_size))
    source = dataclasses.replace(source, block_steps=asgd.data_steps(
        spec.local_sgd, spec.plan.data, seed=spec.seed, steps=total))
  return source


def feed(spec: RunSpec, run: "Experiment", source, *,
         weigh: bool = True) -> tuple[object, "FedSteps"]:
  """`source` (load_dataset's) with its training set's place decided, and the run's steps fed
  by it (`fed_steps`; nothing placed yet: FedSteps.placed reads the set onto the devices).
  Not to `weigh` (a run that only evaluates, and places nothing): decided without the memory.

  A decoded set's Placement (on the devices, whole or split, or the host) is decided here,
  once, before any work: from the memory every process's devices have free less what the
  run's train step takes beside the set, agreed (the smallest). The step is weighed by
  compiling it as it will run, for the placement on the devices that `decide` chooses for the
  set alone in that memory: where the set goes there, training runs that compiled program. A
  shortfall is a UserError.
  """
  if not hasattr(source, "placed"):
    return source, _fed(spec, run, source)
  data, asked = spec.plan.data, spec.data.decoded_placement
  platform = run.mesh.devices.flat[0].platform
  budget, weighed = None, None
  if weigh and asked != "host" and not (asked == "auto" and platform == "cpu"):
    # The same on every process (one config, one platform), so every process takes part.
    room = input_pipeline.agreed_minimum(decoded_input.free_device_bytes(
        [d for d in run.mesh.devices.flat if d.process_index == jax.process_index()]))
    budget = room
    # The placement `decide` chooses for the set alone in that room is the one weighed.
    while budget is not None and weighed is None:
      try:
        where = source.decide(data=data, platform=platform, budget=budget).where
      except UserError:
        break  # nothing fits on the devices: said below, once every process has agreed.
      if where == decoded_input.HOST:
        break
      candidate = source.placed(decoded_input.Placement(where, data, "to be weighed"))
      try:
        steps, step_bytes = _weigh(spec, run, candidate)
      except jax.errors.JaxRuntimeError as e:
        if "RESOURCE_EXHAUSTED" not in str(e):
          raise
        # XLA:TPU counts a program's arguments against memory as it compiles: the set and
        # the step do not fit together, so `decide` must not choose this placement.
        budget = (source.set_bytes if where == decoded_input.WHOLE
                  else source.share_bytes(data)) - 1
        continue
      budget, weighed = min(budget, room - step_bytes), (candidate, steps)
    budget = input_pipeline.agreed_minimum(budget)
  placement = source.decide(data=data, platform=platform, budget=budget)
  if weighed and placement.where == weighed[0].placement.where:
    # The weighed copy goes where it was weighed: its steps read the set as the decision
    # says (its device_input reads `placement` when the set is placed), and say why.
    source, steps = weighed
    source.placement = placement
    return source, dataclasses.replace(steps, weighed=True)
  source = source.placed(placement)
  return source, _fed(spec, run, source)


def _fed(spec: RunSpec, run: "Experiment", source) -> "FedSteps":
  return fed_steps(run, source.device_input(run.batch_sharding, seed=spec.seed,
                                            dtype=models.DTYPES[spec.model.dtype], place=False))


def _weigh(spec: RunSpec, run: "Experiment", source) -> tuple["FedSteps", int]:
  """The run's steps fed by `source` (its set's place decided, not yet placed), with the train
  step compiled — the program training runs, which JAX keeps for its calls — and the device
  memory that step takes beside the set, from XLA's memory analysis (per device): its
  arguments (the state, the set, a batch) and outputs (less the donated state they alias), its
  temporaries (the batch's gathering and augmenting among them) and its code, less the set's
  own bytes."""
  steps = _fed(spec, run, source)
  inputs, labels = input_pipeline.batch_shapes(source, run.batch_sharding,
                                               spec.global_batch_size, seed=spec.seed)
  logging.info("compiling the step to weigh it beside the decoded set (%s) …",
               "a whole copy on each device" if source.placement.where == decoded_input.WHOLE
               else f"split over {source.placement.data} data shards")
  start_s = time.perf_counter()
  with jax.set_mesh(run.mesh):  # as train.py's loop calls it: the same program.
    memory = steps.train_program.lower(
        run.scheme.state, steps.held, inputs, labels,
        jax.ShapeDtypeStruct((), np.int32)).compile().memory_analysis()
  held_bytes = sum(math.prod(x.sharding.shard_shape(x.shape)) * x.dtype.itemsize
                   for x in jax.tree.leaves(steps.held))
  step_bytes = (memory.argument_size_in_bytes + memory.output_size_in_bytes
                - memory.alias_size_in_bytes + memory.temp_size_in_bytes
                + memory.generated_code_size_in_bytes - held_bytes)
  logging.info("compiled in %.1f s: the step takes %s per device beside the set's %s.",
               time.perf_counter() - start_s, decoded_input.size_text(step_bytes),
               decoded_input.size_text(held_bytes))
  return steps, step_bytes


def step_memory_bytes(spec: RunSpec, run: "Experiment", source) -> int:
  """The device memory `feed` weighs the run's train step at, per device, beside `source`'s
  set where `source.placement` puts it."""
  return _weigh(spec, run, source)[1]


@dataclasses.dataclass(frozen=True)
class FedSteps:
  """The run's train and eval steps, each ONE program with the source's input work in front of
  it (`fed_steps`): made once per run, so that training and every evaluation compile once."""
  train_program: compiler_options.Program  # (state, held, inputs, labels, step)
  eval_program: compiler_options.Program  # (variables, inputs, labels, weights)
  device_input: object  # the source's (input_pipeline.source.DeviceInput): its `held` arrays
  # Its train program was compiled to weigh it (`feed`), and JAX keeps that program for its
  # calls: training starts without compiling it again.
  weighed: bool = False

  @property
  def held(self):
    """What the source keeps on the devices: its shapes until `placed`."""
    return self.device_input.held

  def placed(self) -> "FedSteps":
    """These steps with the source's arrays read onto the devices (the same programs)."""
    return dataclasses.replace(self, device_input=self.device_input.placed())

  def train(self, state, inputs, labels, *, step: int):
    """`(state, metrics)` of step `step` on the batch the source sent as `inputs`."""
    return self.train_program(state, self.held, inputs, labels, np.int32(step))

  def evaluate(self, variables, batch):
    """The eval step's sums over `batch`, (inputs, labels, weights) as the source sent them."""
    return self.eval_program(variables, *batch)


def fed_steps(run: Experiment, device_input) -> FedSteps:
  """The run's steps fed by a source's `device_input` (input_pipeline.source.DeviceInput): the
  rows are gathered, converted and augmented inside the step's program, into the model's dtype
  (the step's own compiler options, donation and layouts unchanged)."""
  train = run.scheme.train_step.fed(
      lambda state, held, inputs, labels, step: (state, device_input.train(held, inputs, step),
                                                 labels), donate_argnums=0)
  evaluate = run.eval_step.fed(
      lambda variables, inputs, labels, weights: (variables, device_input.evaluate(inputs),
                                                  labels, weights))
  return FedSteps(train, evaluate, device_input)


def steps_to_train(spec: RunSpec, steps_per_epoch: int) -> int:
  """`num_train_steps` when set (> 0), else `num_epochs` epochs (at least one step)."""
  if spec.loop.num_train_steps > 0:
    return spec.loop.num_train_steps
  return max(1, round(spec.loop.num_epochs * steps_per_epoch))


def make_schedule(spec: RunSpec, *, steps_per_epoch: int, total_steps: int) -> optax.Schedule:
  """The learning rate per step for the run's batch and rules (optim.py)."""
  rule = spec.schedule
  peak = optim.peak_learning_rate(rule.base_learning_rate, spec.global_batch_size,
                                  reference_batch=rule.reference_batch_size,
                                  scaling=rule.lr_scaling)
  return optim.learning_rate_schedule(
      rule.base_learning_rate, peak, steps_per_epoch=steps_per_epoch, total_steps=total_steps,
      warmup_epochs=rule.warmup_epochs, warmup=rule.warmup, decay=rule.lr_decay,
      decay_factor=rule.lr_decay_factor, decay_epochs=rule.lr_decay_epochs)


def make_optimizer(spec: RunSpec, schedule: optax.Schedule, *,
                   norm_axes=None) -> optax.GradientTransformation:
  """The run's optimiser at `schedule` (optim.make_optimizer)."""
  settings = _settings(spec.optimizer)
  settings["lr_multipliers"] = dict(spec.optimizer.lr_multipliers)
  return optim.make_optimizer(schedule, **settings, norm_axes=norm_axes,
                              fc_updates_per_step=spec.step.fc_updates_per_step)


def for_platform(choice: str, by_platform: dict[str, str], platform: str) -> str:
  """A per-platform setting (`max_pool`, `stem_conv`, `grouped_conv`): the choice, or for "auto"
  what was measured fastest on `platform` (the CPU's choice where unmeasured)."""
  if choice == "auto":
    return by_platform.get(platform, by_platform["cpu"])
  return choice


def build_model(spec: RunSpec, num_classes: int, platform: str) -> models.Network:
  """The run's network with its plan's layout, "auto" settings chosen for `platform`."""
  choice = spec.model
  return models.build(choice.name, num_classes, spec.plan.layout, image_size=spec.image_size,
                      dropout_rate=choice.dropout_rate, sync_batch_norm=choice.sync_batch_norm,
                      dtype=choice.dtype,
                      max_pool=for_platform(choice.max_pool, layers.MAX_POOL_BY_PLATFORM,
                                            platform),
                      stem_conv=for_platform(choice.stem_conv, layers.STEM_CONV_BY_PLATFORM,
                                             platform),
                      grouped_conv=for_platform(choice.grouped_conv,
                                                layers.GROUPED_CONV_BY_PLATFORM, platform))


def _sync(spec: RunSpec):
  """How the replicas of a local-SGD scheme meet; None for the synchronous schemes."""
  if not spec.plan.local_sgd:
    return None
  return local_sgd_schemes.SCHEMES[spec.plan.scheme].make_sync(spec.local_sgd, spec.plan.data,
                                                               seed=spec.seed)


def build(spec: RunSpec, *, num_classes: int, channels: int, steps_per_epoch: int,
          total_steps: int, devices=None, abstract: bool = False) -> Experiment:
  """The objects a run of `spec` is made of.

  Args:
    spec: the resolved run (`resolve`).
    num_classes, channels: the dataset's.
    steps_per_epoch, total_steps: for the learning-rate schedule.
    devices: where the mesh goes; default `jax.devices()`. Compile-only devices (a TPU
      topology's, say) build a scheme to compile with `abstract`.
    abstract: the scheme's state as shape structs (to restore a checkpoint into, or to compile)
      instead of arrays; `scheme.init()` makes the arrays.

  Raises:
    UserError: for too few devices (the one thing `resolve` cannot know).
  """
  plan = spec.plan
  mesh = mesh_lib.make_mesh(plan.data, plan.model, devices=devices,
                            auto_axes=spec.step.backend == "gspmd")
  model = build_model(spec, num_classes, mesh.devices.flat[0].platform)
  schedule = make_schedule(spec, steps_per_epoch=steps_per_epoch, total_steps=total_steps)
  tx = make_optimizer(spec, schedule,
                      norm_axes=schemes.norm_axes(plan, model, backend=spec.step.backend))
  image_shape = models.input_shape(spec.model.name, spec.image_size, channels)
  scheme = schemes.build(model, plan, mesh, tx=tx, image_shape=image_shape, seed=spec.seed,
                         options=spec.step, sync=_sync(spec), abstract=abstract)
  eval_step = explicit.make_eval_step(model, plan, mesh, variable_specs=scheme.eval_specs,
                                      crops=spec.data.eval_crops,
                                      tune_xla_cpu=spec.step.tune_xla_cpu)
  return Experiment(spec, mesh, model, tx, schedule, scheme, eval_step)


@dataclasses.dataclass(frozen=True)
class CompileOnly:
  """A run's train step lowered without running it (`lower_train_step`)."""
  run: Experiment  # its state shape structs, laid out on the mesh.
  lowered: jax.stages.Lowered  # `.compile()`: the program to read (HLO, memory, cost) or run.


def lower_train_step(spec: RunSpec, *, num_classes: int, channels: int = 3, devices=None,
                     steps_per_epoch: int = 100, total_steps: int = 1000) -> CompileOnly:
  """The train step of `spec` on `devices`, lowered for its global batch of images — the step
  `train.py` runs (there with the source's input work in front of it: `feed`), with no array
  made: the one path by which benchmarks and tests compile a config's step for devices that are
  here, or that are not (a TPU or GPU topology's compile-only devices).

  Args:
    spec: the resolved run.
    num_classes, channels: the dataset's.
    devices: where the mesh goes; default `jax.devices()`.
    steps_per_epoch, total_steps: the schedule's, which change constants in the program, never
      its shapes, layout or collectives (any values do for reading a program).
  """
  run = build(spec, num_classes=num_classes, channels=channels, steps_per_epoch=steps_per_epoch,
              total_steps=total_steps, devices=devices, abstract=True)
  shape = models.input_shape(spec.model.name, spec.image_size, channels,
                             batch=spec.global_batch_size)
  images = jax.ShapeDtypeStruct(shape, jax.numpy.float32, sharding=run.batch_sharding)
  labels = jax.ShapeDtypeStruct(shape[:1], jax.numpy.int32, sharding=run.batch_sharding)
  with jax.set_mesh(run.mesh):  # as train.py's loop runs the step.
    return CompileOnly(run, run.scheme.train_step.lower(run.scheme.state, images, labels))
