"""One entry point for every scheme: its initial state, train step and the parameters to evaluate.

The synchronous schemes (single, data, model, hybrid, owt) share `train_state` + `step`; the
local-SGD schemes (averaging, asgd) share `local_sgd` and differ in their sync.
"""

import dataclasses
from collections.abc import Callable

import jax
from jax.sharding import PartitionSpec as P

from hybrid_parallel import asgd, averaging, local_sgd, models, partitioning, step, train_state
from hybrid_parallel.errors import UserError


@dataclasses.dataclass
class Scheme:
  """What the training loop needs from a scheme.

  Attributes:
    state: the initial state on the mesh.
    train_step: `(state, images, labels) -> (state, metrics)`.
    eval_variables: `state -> {"params": ..., ["batch_stats": ...]}`, the model to evaluate,
      placed with `eval_specs`.
    eval_specs: PartitionSpecs of those variables.
  """
  state: object
  train_step: Callable
  eval_variables: Callable
  eval_specs: dict


def build(config, model: models.AlexNet, plan: partitioning.Plan, mesh, tx, image_shape,
          abstract: bool = False) -> Scheme:
  """The state and steps of `config.parallelism` under `plan` (`abstract`: state as shapes)."""
  if plan.scheme in partitioning.SYNCHRONOUS:
    state, specs = train_state.create(model, tx, plan, mesh, image_shape, config.seed, abstract)
    train_step = step.make_train_step(model, plan, mesh, tx, specs, config.grad_reduce,
                                      config.microbatches)
    return Scheme(state, train_step, _variables, _variables(specs))
  if model.arch.batch_norm:
    synchronous = ", ".join(partitioning.SYNCHRONOUS)
    raise UserError(f"parallelism {plan.scheme!r} keeps no batch-norm statistics; train "
                    f"{config.model} with a synchronous scheme ({synchronous}).")
  if config.microbatches > 1:
    raise UserError(f"microbatches apply to the synchronous schemes, not {plan.scheme!r}.")
  if plan.scheme == "averaging":
    sync = averaging.make_sync(config.average_method, plan.data, config.sync_every,
                               config.average_momentum)
    state, specs = local_sgd.create(model, tx, plan, mesh, image_shape, config.seed,
                                    abstract=abstract)
    eval_params = jax.jit(averaging.eval_params)
  else:  # asgd
    sync = asgd.make_sync(plan.data, config.n_push, config.n_fetch, config.asgd_stagger,
                          config.warm_start_steps)
    state, specs = local_sgd.create(model, tx, plan, mesh, image_shape, config.seed,
                                    asgd.client_init, asgd.shared_init, abstract)
    eval_params = asgd.eval_params
  # The evaluated model (replica mean or server) is whole on every device.
  whole = jax.tree.map(lambda _: P(), specs.local.params, is_leaf=lambda x: isinstance(x, P))
  return Scheme(state, local_sgd.make_step(model, plan, mesh, tx, specs, sync),
                lambda s: {"params": eval_params(s)}, {"params": whole})


def _variables(state: train_state.TrainState) -> dict:
  """The model's variable collections held by a synchronous state (or its specs)."""
  if state.batch_stats:
    return {"params": state.params, "batch_stats": state.batch_stats}
  return {"params": state.params}
