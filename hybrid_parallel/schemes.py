"""One entry point for every scheme: its initial state, train step and the parameters to evaluate.

The synchronous schemes (single, data, model, hybrid, owt) share `train_state` + `step`; the
local-SGD schemes (averaging, asgd) share `local_sgd` and differ in their sync.
"""

import dataclasses
import functools
from collections.abc import Callable

import jax
from jax.sharding import PartitionSpec as P

from hybrid_parallel import asgd, averaging, gspmd, local_sgd, models, optim, partitioning
from hybrid_parallel import pmap_step, step, train_state
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel.errors import UserError


# How the step is partitioned: explicit (shard_map, the collectives written out; the default),
# gspmd (the same shardings handed to jax.jit; hybrid_parallel/gspmd.py) or pmap (the data scheme
# as the Flax examples write it; hybrid_parallel/pmap_step.py).
BACKENDS = ("explicit", "gspmd", "pmap")


@dataclasses.dataclass
class Scheme:
  """What the training loop needs from a scheme.

  Attributes:
    state: the initial state on the mesh (shape structs when built `abstract`).
    init: `() -> state`: creates the initial state's arrays (what `state` describes).
    train_step: `(state, images, labels) -> (state, metrics)`.
    eval_variables: `state -> {"params": ..., ["batch_stats": ...]}`, the model to evaluate,
      placed with `eval_specs`.
    eval_specs: PartitionSpecs of those variables.
  """
  state: object
  init: Callable
  train_step: Callable
  eval_variables: Callable
  eval_specs: dict


def setup(config, plan: partitioning.Plan, mesh, num_classes: int, channels: int, schedule,
          abstract: bool = False) -> tuple[models.AlexNet, object, Scheme]:
  """The model, optimiser and scheme of `config` under `plan`: what the training loop, the
  benchmarks and the tests all build (`abstract`: the state as shapes, to restore or compile)."""
  model = models.build(config.model, num_classes, plan.layout, config.image_size,
                       config.dropout_rate, config.sync_batch_norm, config.dtype)
  # LARS sums a split layer's norms over its shards' axes; the GSPMD step sees whole arrays.
  norm_plan = plan if config.backend != "gspmd" else partitioning.plan("single", 1, 1)
  tx = optim.make_optimizer(config, schedule,
                            partitioning.sharded_axes(norm_plan, model.arch.fc_names()[-1]))
  image_shape = models.input_shape(config.model, config.image_size, channels)
  return model, tx, build(config, model, plan, mesh, tx, image_shape, abstract)


def make_mesh(config, plan: partitioning.Plan, devices=None):
  """The mesh of `plan`, with the axis types `config.backend` needs."""
  return mesh_lib.make_mesh(plan.data, plan.model, devices, auto_axes=config.backend == "gspmd")


def build(config, model: models.AlexNet, plan: partitioning.Plan, mesh, tx, image_shape,
          abstract: bool = False) -> Scheme:
  """The state and steps of `config.parallelism` under `plan` (`abstract`: state as shapes)."""
  if config.backend not in BACKENDS:
    raise UserError(f"unknown backend {config.backend!r}; choose one of {', '.join(BACKENDS)}.")
  if config.backend == "pmap":
    pmap_step.check_supported(config, plan)
  if config.backend == "gspmd" and plan.scheme not in partitioning.SYNCHRONOUS:
    raise UserError(f"backend 'gspmd' partitions the synchronous schemes; {plan.scheme!r} "
                    f"needs the explicit backend.")
  if plan.scheme in partitioning.SYNCHRONOUS:
    create = functools.partial(train_state.create, model, tx, plan, mesh, image_shape,
                               config.seed)
    state, specs = create(abstract)
    if config.backend == "gspmd":
      gspmd.check_supported(config, model.arch)
      train_step = gspmd.make_train_step(model, plan, mesh, tx, specs,
                                         config.skip_nonfinite_steps, config.tune_xla_cpu)
    elif config.backend == "pmap":
      train_step = pmap_step.make_train_step(model, mesh, tx, config.skip_nonfinite_steps,
                                             config.tune_xla_cpu)
    else:
      train_step = step.make_train_step(model, plan, mesh, tx, specs, config.grad_reduce,
                                        config.microbatches, config.skip_nonfinite_steps,
                                        config.tune_xla_cpu)
    return Scheme(state, lambda: create()[0], train_step, _variables, _variables(specs))
  if model.arch.batch_norm:
    synchronous = ", ".join(partitioning.SYNCHRONOUS)
    raise UserError(f"parallelism {plan.scheme!r} keeps no batch-norm statistics; train "
                    f"{config.model} with a synchronous scheme ({synchronous}).")
  for field, unsupported in (("microbatches", config.microbatches > 1),
                             ("skip_nonfinite_steps", config.skip_nonfinite_steps)):
    if unsupported:
      raise UserError(f"{field} applies to the synchronous schemes, not {plan.scheme!r}.")
  if plan.scheme == "averaging":
    sync = averaging.make_sync(config.average_method, plan.data, config.sync_every,
                               config.average_momentum)
    create = functools.partial(local_sgd.create, model, tx, plan, mesh, image_shape,
                               config.seed)
    eval_params = jax.jit(averaging.eval_params)
  else:  # asgd
    sync = asgd.make_sync(plan.data, config.n_push, config.n_fetch, config.asgd_stagger,
                          config.warm_start_steps)
    create = functools.partial(local_sgd.create, model, tx, plan, mesh, image_shape,
                               config.seed, asgd.client_init, asgd.shared_init)
    eval_params = asgd.eval_params
  state, specs = create(abstract=abstract)
  # The evaluated model (replica mean or server) is whole on every device.
  whole = jax.tree.map(lambda _: P(), specs.local.params, is_leaf=lambda x: isinstance(x, P))
  train_step = local_sgd.make_step(model, plan, mesh, tx, specs, sync, config.tune_xla_cpu)
  return Scheme(state, lambda: create()[0], train_step, lambda s: {"params": eval_params(s)},
                {"params": whole})


def _variables(state: train_state.TrainState) -> dict:
  """The model's variable collections held by a synchronous state (or its specs)."""
  if state.batch_stats:
    return {"params": state.params, "batch_stats": state.batch_stats}
  return {"params": state.params}
