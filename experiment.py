"""A config made into the library's objects: plan, mesh, model, optimiser, scheme and steps.

This is where a `ConfigDict` stops: everything below (`hybrid_parallel`, `input_pipeline`) takes
the values it uses as arguments. `train.py` runs the loop on what `build` returns; the tests,
benchmarks and notebook build the same objects through the same function.
"""

import dataclasses

import jax
import ml_collections
import optax
from jax.sharding import NamedSharding

import input_pipeline
from hybrid_parallel import layers, models, optim, partitioning, schemes
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel.local_sgd import asgd, averaging
from hybrid_parallel.steps import explicit


@dataclasses.dataclass
class Experiment:
  """Everything a run of one config is made of (see `build`)."""
  plan: partitioning.Plan
  mesh: jax.sharding.Mesh
  model: models.AlexNet
  tx: optax.GradientTransformation
  schedule: optax.Schedule
  scheme: schemes.Scheme
  eval_step: object  # (variables, images, labels, weights) -> sums; see steps.explicit.

  @property
  def batch_sharding(self) -> NamedSharding:
    """How a global batch of images or labels is laid out on the mesh."""
    return NamedSharding(self.mesh, self.plan.batch_spec)


def load_dataset(config: ml_collections.ConfigDict):
  """The input pipeline's source for `config.dataset` (input_pipeline.load)."""
  return input_pipeline.load(
      config.dataset, image_size=config.image_size, seed=config.seed,
      synthetic_examples=config.synthetic_examples, synthetic_classes=config.synthetic_classes,
      data_dir=config.data_dir or None, download=config.tfds_download,
      input_shards=config.input_shards, shuffle_buffer=config.shuffle_buffer,
      pca_lighting_std=config.pca_lighting_std, eval_crops=config.eval_crops)


def steps_to_train(config: ml_collections.ConfigDict, steps_per_epoch: int) -> int:
  """`num_train_steps` when set (> 0), else `num_epochs` epochs (at least one step)."""
  if config.num_train_steps > 0:
    return config.num_train_steps
  return max(1, round(config.num_epochs * steps_per_epoch))


def make_schedule(config: ml_collections.ConfigDict, *, steps_per_epoch: int,
                  total_steps: int) -> optax.Schedule:
  """The learning rate per step for the config's batch and rules (optim.py)."""
  peak = optim.peak_learning_rate(config.base_learning_rate, config.global_batch_size,
                                  reference_batch=config.reference_batch_size,
                                  scaling=config.lr_scaling)
  return optim.learning_rate_schedule(
      config.base_learning_rate, peak, steps_per_epoch=steps_per_epoch, total_steps=total_steps,
      warmup_epochs=config.warmup_epochs, warmup=config.warmup, decay=config.lr_decay,
      decay_factor=config.lr_decay_factor, decay_epochs=tuple(config.lr_decay_epochs))


def make_optimizer(config: ml_collections.ConfigDict, schedule: optax.Schedule, *,
                   norm_axes=None, fc_updates_per_step: int = 1) -> optax.GradientTransformation:
  """The config's optimiser at `schedule` (optim.make_optimizer)."""
  return optim.make_optimizer(
      schedule, optimizer=config.optimizer, momentum=config.momentum, nesterov=config.nesterov,
      weight_decay=config.weight_decay, lars_trust_coefficient=config.lars_trust_coefficient,
      lars_eps=config.lars_eps, lr_multipliers=dict(config.lr_multipliers), norm_axes=norm_axes,
      fc_updates_per_step=fc_updates_per_step)


def for_platform(choice: str, by_platform: dict[str, str], platform: str) -> str:
  """A per-platform setting (`config.max_pool`, `stem_conv`, `grouped_conv`): the config's
  choice, or for "auto" what was measured fastest on `platform` (the CPU's choice where
  unmeasured)."""
  if choice == "auto":
    return by_platform.get(platform, by_platform["cpu"])
  return choice


def _sync(config: ml_collections.ConfigDict, plan: partitioning.Plan):
  """How the replicas of a local-SGD scheme meet; None for the synchronous schemes."""
  if plan.scheme == "averaging":
    return averaging.make_sync(config.average_method, plan.data, sync_every=config.sync_every,
                               average_momentum=config.average_momentum)
  if plan.scheme == "asgd":
    return asgd.make_sync(plan.data, n_push=config.n_push, n_fetch=config.n_fetch,
                          stagger=config.asgd_stagger, warm_start_steps=config.warm_start_steps)
  return None


def build(config: ml_collections.ConfigDict, *, num_classes: int, channels: int,
          steps_per_epoch: int, total_steps: int, devices=None,
          abstract: bool = False) -> Experiment:
  """The objects a run of `config` is made of.

  Args:
    config: the run's config (configs/default.py describes every field).
    num_classes, channels: the dataset's.
    steps_per_epoch, total_steps: for the learning-rate schedule.
    devices: where the mesh goes; default `jax.devices()`.
    abstract: the scheme's state as shape structs (to restore a checkpoint into, or to compile)
      instead of arrays; `scheme.init()` makes the arrays.

  Raises:
    UserError: for a config, mesh or batch that cannot work, before anything is compiled.
  """
  plan = partitioning.make_plan(config.parallelism, config.mesh.data, config.mesh.model)
  partitioning.check_batch(plan, config.global_batch_size, microbatches=config.microbatches)
  partitioning.check_batch(plan, config.eval_batch_size, what="eval_batch_size")
  mesh = mesh_lib.make_mesh(plan.data, plan.model, devices, auto_axes=config.backend == "gspmd")
  platform = mesh.devices.flat[0].platform
  model = models.build(config.model, num_classes, plan.layout, image_size=config.image_size,
                       dropout_rate=config.dropout_rate, sync_batch_norm=config.sync_batch_norm,
                       dtype=config.dtype,
                       max_pool=for_platform(config.max_pool, layers.MAX_POOL_BY_PLATFORM,
                                             platform),
                       stem_conv=for_platform(config.stem_conv, layers.STEM_CONV_BY_PLATFORM,
                                              platform),
                       grouped_conv=for_platform(config.grouped_conv,
                                                 layers.GROUPED_CONV_BY_PLATFORM, platform))
  schedule = make_schedule(config, steps_per_epoch=steps_per_epoch, total_steps=total_steps)
  tx = make_optimizer(config, schedule,
                      norm_axes=schemes.norm_axes(plan, model, backend=config.backend),
                      fc_updates_per_step=config.fc_updates_per_step)
  image_shape = models.input_shape(config.model, config.image_size, channels)
  scheme = schemes.build(model, plan, mesh, tx, image_shape, seed=config.seed,
                         backend=config.backend, grad_reduce=config.grad_reduce,
                         microbatches=config.microbatches,
                         skip_nonfinite=config.skip_nonfinite_steps,
                         tune_xla_cpu=config.tune_xla_cpu, owt_variant=config.owt_variant,
                         fc_updates_per_step=config.fc_updates_per_step,
                         sync=_sync(config, plan), abstract=abstract)
  eval_step = explicit.make_eval_step(model, plan, mesh, scheme.eval_specs,
                                      crops=config.eval_crops, tune_xla_cpu=config.tune_xla_cpu)
  return Experiment(plan, mesh, model, tx, schedule, scheme, eval_step)
