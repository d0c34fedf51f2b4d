"""One entry point for every scheme: its initial state, train step and the parameters to evaluate.

The synchronous schemes (single, data, model, hybrid, owt) share `train_state` + `step`; the
local-SGD schemes (averaging, asgd) share `local_sgd` and differ in their sync.
"""

import dataclasses
import functools
from collections.abc import Callable

import jax
from jax.sharding import PartitionSpec as P

from hybrid_parallel import asgd, averaging, local_sgd, models, partitioning, step, train_state
from hybrid_parallel.errors import UserError


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


def build(config, model: models.AlexNet, plan: partitioning.Plan, mesh, tx, image_shape,
          abstract: bool = False) -> Scheme:
  """The state and steps of `config.parallelism` under `plan` (`abstract`: state as shapes)."""
  if plan.scheme in partitioning.SYNCHRONOUS:
    create = functools.partial(train_state.create, model, tx, plan, mesh, image_shape,
                               config.seed)
    state, specs = create(abstract)
    train_step = step.make_train_step(model, plan, mesh, tx, specs, config.grad_reduce,
                                      config.microbatches, config.skip_nonfinite_steps)
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
  train_step = local_sgd.make_step(model, plan, mesh, tx, specs, sync)
  return Scheme(state, lambda: create()[0], train_step, lambda s: {"params": eval_params(s)},
                {"params": whole})


def _variables(state: train_state.TrainState) -> dict:
  """The model's variable collections held by a synchronous state (or its specs)."""
  if state.batch_stats:
    return {"params": state.params, "batch_stats": state.batch_stats}
  return {"params": state.params}
