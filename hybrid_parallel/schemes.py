"""One entry point for every scheme: its initial state, train step and the parameters to evaluate.

The synchronous schemes (single, data, model, hybrid, owt) share `train_state` and the step of
one of the backends in `steps/`; the local-SGD schemes (averaging, asgd) share `local_sgd.core`
and differ in their `Sync`.
"""

import dataclasses
import functools
from collections.abc import Callable

import jax
from jax.sharding import PartitionSpec as P

from hybrid_parallel import collectives, models, partitioning, train_state
from hybrid_parallel.errors import UserError
from hybrid_parallel.local_sgd import core as local_sgd
from hybrid_parallel.steps import common, explicit, gspmd, pmap, variable_batch


# The modules that build a synchronous step, by `StepOptions.backend` (each module's
# `make_train_step(model, plan, mesh, *, tx, specs, options)`; owt's variants (b) and (c):
# variable_batch).
BACKENDS = {"explicit": explicit, "gspmd": gspmd, "pmap": pmap}


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


def norm_axes(plan: partitioning.Plan, model: models.Network, *, backend: str):
  """`(path, leaf) -> axes`: the mesh axes over which the step sees a parameter in shards (for
  LARS's layer norms). The GSPMD step sees whole arrays, whatever their sharding."""
  seen = plan if backend != "gspmd" else partitioning.make_plan("single", 1, 1)
  return partitioning.sharded_axes(seen, model.arch.fc_names()[-1])


def check(plan: partitioning.Plan, options: common.StepOptions, *, batch_norm: bool,
          sync_batch_norm: bool, processes: int, global_batch: int) -> None:
  """One UserError for a combination the scheme, its backend or its options cannot run.

  Called when a run is resolved (validation.check_run), after each option's own check.
  """
  common.check_backend(options, scheme=plan.scheme,
                       per_worker_batch_norm=batch_norm and not sync_batch_norm,
                       processes=processes)
  collectives.check_axis_sizes(options.grad_reduce,
                               {"mesh.data": plan.data, "mesh.model": plan.model})
  variable_batch.check(options.owt_variant, scheme=plan.scheme, model_axis=plan.model,
                       fc_updates_per_step=options.fc_updates_per_step, backend=options.backend,
                       microbatches=options.microbatches,
                       local_batch=global_batch // plan.batch_divisor)
  if not plan.local_sgd:
    return
  if batch_norm:
    synchronous = ", ".join(partitioning.SYNCHRONOUS)
    raise UserError(f"parallelism {plan.scheme!r} keeps no batch-norm statistics; train a model "
                    f"with batch norm with a synchronous scheme ({synchronous}).")
  for field, unsupported in (("microbatches", options.microbatches > 1),
                             ("skip_nonfinite_steps", options.skip_nonfinite_steps)):
    if unsupported:
      raise UserError(f"{field} applies to the synchronous schemes, not {plan.scheme!r}.")


def build(model: models.Network, plan: partitioning.Plan, mesh, *, tx, image_shape, seed: int,
          options: common.StepOptions, sync: local_sgd.Sync | None = None,
          abstract: bool = False) -> Scheme:
  """The state and steps of `plan.scheme` (`abstract`: the state as shapes, to restore or compile).

  Args:
    model: the network with `plan.layout`.
    plan, mesh: the scheme's plan and the mesh it runs on.
    tx: the optax optimiser (an optim.GroupedOptimizer when `options.fc_updates_per_step` > 1).
    image_shape: the shape of one input image batch (for initialisation).
    seed: the parameters' (and dropout's) seed.
    options: how a synchronous step is built (`check` has accepted them for this plan).
    sync: how the replicas of a local-SGD scheme meet (its module's `make_sync`,
      local_sgd.SCHEMES); required for those schemes, unused by the others.
  """
  if not plan.local_sgd:
    create = functools.partial(train_state.create, model, plan, mesh, tx=tx,
                               image_shape=image_shape, seed=seed)
    state, specs = create(abstract=abstract)
    steps = variable_batch if options.owt_variant != "a" else BACKENDS[options.backend]
    train_step = steps.make_train_step(model, plan, mesh, tx=tx, specs=specs, options=options)
    return Scheme(state, lambda: create()[0], train_step, _variables, _variables(specs))

  if sync is None:
    raise ValueError(f"parallelism {plan.scheme!r} needs a sync (local_sgd.averaging or asgd).")
  create = functools.partial(local_sgd.create, model, plan, mesh, tx=tx, image_shape=image_shape,
                             seed=seed, sync=sync)
  state, specs = create(abstract=abstract)
  # The evaluated model (replica mean or server) is whole on every device.
  whole = jax.tree.map(lambda _: P(), specs.local.params, is_leaf=lambda x: isinstance(x, P))
  train_step = local_sgd.make_step(model, plan, mesh, tx=tx, specs=specs, sync=sync,
                                   tune_xla_cpu=options.tune_xla_cpu)
  return Scheme(state, lambda: create()[0], train_step,
                lambda s: {"params": sync.eval_params(s)}, {"params": whole})


def _variables(state: train_state.TrainState) -> dict:
  """The model's variable collections held by a synchronous state (or its specs)."""
  if state.batch_stats:
    return {"params": state.params, "batch_stats": state.batch_stats}
  return {"params": state.params}
