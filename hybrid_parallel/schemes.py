"""One entry point for every scheme: its initial state, train step and the parameters to evaluate.

The synchronous schemes (single, data, model, hybrid, owt) share `train_state` + `step`; the
local-SGD schemes (averaging, asgd) share `local_sgd` and differ in their sync.
"""

import dataclasses
from collections.abc import Callable

import jax
from jax.sharding import PartitionSpec as P

from hybrid_parallel import asgd, averaging, local_sgd, models, partitioning, step, train_state


@dataclasses.dataclass
class Scheme:
  """What the training loop needs from a scheme.

  Attributes:
    state: the initial state on the mesh.
    train_step: `(state, images, labels) -> (state, metrics)`.
    eval_params: `state -> params` to evaluate, placed with `eval_param_specs`.
    eval_param_specs: PartitionSpecs of those parameters.
  """
  state: object
  train_step: Callable
  eval_params: Callable
  eval_param_specs: object


def build(config, model: models.AlexNet, plan: partitioning.Plan, mesh, tx, image_shape,
          abstract: bool = False) -> Scheme:
  """The state and steps of `config.parallelism` under `plan` (`abstract`: state as shapes)."""
  if plan.scheme in partitioning.SYNCHRONOUS:
    state, specs = train_state.create(model, tx, plan, mesh, image_shape, config.seed, abstract)
    return Scheme(state, step.make_train_step(model, plan, mesh, tx, specs, config.grad_reduce),
                  lambda s: s.params, specs.params)
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
  return Scheme(state, local_sgd.make_step(model, plan, mesh, tx, specs, sync), eval_params,
                whole)
