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


def norm_axes(plan: partitioning.Plan, model: models.AlexNet, *, backend: str):
  """`(path, leaf) -> axes`: the mesh axes over which the step sees a parameter in shards (for
  LARS's layer norms). The GSPMD step sees whole arrays, whatever their sharding."""
  seen = plan if backend != "gspmd" else partitioning.make_plan("single", 1, 1)
  return partitioning.sharded_axes(seen, model.arch.fc_names()[-1])


def check(plan: partitioning.Plan, model: models.AlexNet, *, backend: str = "explicit",
          grad_reduce: str = "psum", microbatches: int = 1, skip_nonfinite: bool = False,
          processes: int = 1, owt_variant: str = "a", fc_updates_per_step: int = 1,
          global_batch: int | None = None) -> None:
  """One UserError for a combination the scheme or the backend cannot run (see `build`)."""
  common.check_backend(backend, scheme=plan.scheme, grad_reduce=grad_reduce,
                       microbatches=microbatches,
                       per_worker_batch_norm=model.arch.batch_norm and not model.sync_batch_norm,
                       processes=processes)
  collectives.check_algorithm(grad_reduce)
  variable_batch.check(owt_variant, scheme=plan.scheme, model_axis=plan.model,
                       fc_updates_per_step=fc_updates_per_step, backend=backend,
                       microbatches=microbatches,
                       local_batch=global_batch // plan.batch_divisor if global_batch else None)
  if plan.scheme in partitioning.SYNCHRONOUS:
    return
  if model.arch.batch_norm:
    synchronous = ", ".join(partitioning.SYNCHRONOUS)
    raise UserError(f"parallelism {plan.scheme!r} keeps no batch-norm statistics; train a model "
                    f"with batch norm with a synchronous scheme ({synchronous}).")
  for field, unsupported in (("microbatches", microbatches > 1),
                             ("skip_nonfinite_steps", skip_nonfinite)):
    if unsupported:
      raise UserError(f"{field} applies to the synchronous schemes, not {plan.scheme!r}.")


def build(model: models.AlexNet, plan: partitioning.Plan, mesh, tx, image_shape, *, seed: int,
          backend: str = "explicit", grad_reduce: str = "psum", microbatches: int = 1,
          skip_nonfinite: bool = False, tune_xla_cpu: bool = True, owt_variant: str = "a",
          fc_updates_per_step: int = 1, sync: local_sgd.Sync | None = None,
          abstract: bool = False) -> Scheme:
  """The state and steps of `plan.scheme` (`abstract`: the state as shapes, to restore or compile).

  Args:
    model: the network with `plan.layout`.
    plan, mesh: the scheme's plan and the mesh it runs on.
    tx: the optax optimiser.
    image_shape: the shape of one input image batch (for initialisation).
    seed: the parameters' (and dropout's) seed.
    backend: how a synchronous step is partitioned (`steps.common.BACKENDS`).
    grad_reduce, microbatches, skip_nonfinite, tune_xla_cpu, owt_variant,
      fc_updates_per_step: see `steps.explicit` (`tx` is an optim.GroupedOptimizer when
      fc_updates_per_step > 1).
    sync: how the replicas of a local-SGD scheme meet (`local_sgd.averaging.make_sync`,
      `local_sgd.asgd.make_sync`); required for those schemes, unused by the others.

  Raises:
    UserError: for a combination the scheme or backend cannot run.
  """
  check(plan, model, backend=backend, grad_reduce=grad_reduce, microbatches=microbatches,
        skip_nonfinite=skip_nonfinite, processes=jax.process_count(), owt_variant=owt_variant,
        fc_updates_per_step=fc_updates_per_step)
  if plan.scheme in partitioning.SYNCHRONOUS:
    create = functools.partial(train_state.create, model, tx, plan, mesh, image_shape, seed=seed)
    state, specs = create(abstract=abstract)
    if backend == "gspmd":
      train_step = gspmd.make_train_step(model, plan, mesh, tx, specs,
                                         skip_nonfinite=skip_nonfinite,
                                         tune_xla_cpu=tune_xla_cpu)
    elif backend == "pmap":
      train_step = pmap.make_train_step(model, mesh, tx, skip_nonfinite=skip_nonfinite,
                                        tune_xla_cpu=tune_xla_cpu)
    else:
      train_step = explicit.make_train_step(model, plan, mesh, tx, specs, grad_reduce=grad_reduce,
                                            microbatches=microbatches,
                                            skip_nonfinite=skip_nonfinite,
                                            tune_xla_cpu=tune_xla_cpu, owt_variant=owt_variant,
                                            fc_updates_per_step=fc_updates_per_step)
    return Scheme(state, lambda: create()[0], train_step, _variables, _variables(specs))

  if sync is None:
    raise ValueError(f"parallelism {plan.scheme!r} needs a sync (local_sgd.averaging or asgd).")
  create = functools.partial(local_sgd.create, model, tx, plan, mesh, image_shape, seed=seed,
                             sync=sync)
  state, specs = create(abstract=abstract)
  # The evaluated model (replica mean or server) is whole on every device.
  whole = jax.tree.map(lambda _: P(), specs.local.params, is_leaf=lambda x: isinstance(x, P))
  train_step = local_sgd.make_step(model, plan, mesh, tx, specs, sync=sync,
                                   tune_xla_cpu=tune_xla_cpu)
  return Scheme(state, lambda: create()[0], train_step,
                lambda s: {"params": sync.eval_params(s)}, {"params": whole})


def _variables(state: train_state.TrainState) -> dict:
  """The model's variable collections held by a synchronous state (or its specs)."""
  if state.batch_stats:
    return {"params": state.params, "batch_stats": state.batch_stats}
  return {"params": state.params}
