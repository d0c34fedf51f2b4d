"""The training state, its shardings, and its creation: once for the whole network, then laid out
on the mesh."""

import functools

import flax.struct
import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec as P

from hybrid_parallel import compiler_options, layers, models, optim, partitioning
from hybrid_parallel import mesh as mesh_lib


class TrainState(flax.struct.PyTreeNode):
  """Everything a step reads and writes.

  Attributes:
    step: number of updates applied so far.
    params: parameters at full shapes, sharded as the plan says.
    opt_state: optax state; its parameter-shaped slots are sharded like the parameters.
    rng: raw uint32 key data of the run's root key; dropout keys derive from (rng, step).
    batch_stats: running batch-norm statistics, sharded like the parameters of their layer
      (empty for models without batch norm).
  """
  step: jax.Array
  params: dict
  opt_state: optax.OptState
  rng: jax.Array
  batch_stats: dict = flax.struct.field(default_factory=dict)


def _optimizer_specs(tx, opt_state, param_specs):
  """The optimiser state's specs: each copy of the parameter tree in it gets the parameters'."""
  if isinstance(tx, optim.GroupedOptimizer):  # a state per layer group, over its layers.
    split = optim.split_groups(param_specs)
    return {g: _optimizer_specs(tx.groups[g], opt_state[g], split[g]) for g in tx.groups}
  return optax.tree_map_params(tx, lambda _, spec: spec, opt_state, param_specs,
                               transform_non_params=lambda _: P(),
                               is_leaf=lambda x: isinstance(x, P))


def state_specs(abstract_state: TrainState, plan: partitioning.Plan, *, tx, classifier: str):
  """PartitionSpecs of every leaf of the state (a TrainState of PartitionSpecs)."""
  param_specs = partitioning.param_specs(abstract_state.params, plan, classifier)
  opt_specs = _optimizer_specs(tx, abstract_state.opt_state, param_specs)
  stats_specs = partitioning.param_specs(abstract_state.batch_stats, plan, classifier)
  return TrainState(step=P(), params=param_specs, opt_state=opt_specs, rng=P(),
                    batch_stats=stats_specs)


def initial_variables(model: models.Network, image_shape, *, key: jax.Array) -> dict:
  """The whole single-device network's (`Layout()`) initial variables from the run's root `key`
  (`jax.random.key(seed)`): "params" and, with batch norm, "batch_stats", at least float32
  (`layers.PARAM_DTYPE`; a float64 reference keeps the same values in float64).

  They depend on the image's height, width and channels, not on the batch: the network is
  initialised on one image, so one program serves every batch size — and, the key being its
  argument, every seed.
  """
  whole = model.clone(layout=models.Layout())
  variables = whole.init(jax.random.fold_in(key, 0),
                         jnp.zeros((1,) + tuple(image_shape[1:]), jnp.float32),
                         example_ids_B=jnp.zeros(1, jnp.int32))
  widen = lambda tree: jax.tree.map(lambda x: x.astype(layers.at_least_float32(model.dtype)), tree)
  return {"params": widen(variables["params"]),
          "batch_stats": widen(variables.get("batch_stats", {}))}


def root_key_data(seed: int) -> jax.Array:
  """The run's root key as raw uint32 key data: what the state and its checkpoints hold (the
  same two words as the legacy `PRNGKey(seed)`, so checkpoints written before read as ever)."""
  return jax.random.key_data(jax.random.key(seed))


def from_variables(variables: dict, tx, *, seed: int) -> TrainState:
  """The state at step 0 that starts from `variables` (`initial_variables`) with `tx`."""
  return TrainState(step=jnp.zeros((), jnp.int32), params=variables["params"],
                    opt_state=tx.init(variables["params"]), rng=root_key_data(seed),
                    batch_stats=variables["batch_stats"])


def create_unsharded(model: models.Network, tx, image_shape, *, seed: int) -> TrainState:
  """The initial state of the whole single-device network for `seed`.

  Every scheme starts from these values, so every scheme starts from the same point.
  """
  return from_variables(initial_variables(model, image_shape, key=jax.random.key(seed)), tx,
                        seed=seed)


def create(model: models.Network, plan: partitioning.Plan, mesh, *, tx, image_shape, seed: int,
           abstract: bool = False):
  """Initialises the full-size model with `seed` and places the state with the plan's shardings.

  The initial state is computed by `initialize` (one program of the whole network on one device)
  and then laid out on the mesh: its random initialisers are the same program for every mesh,
  scheme, batch and optimiser, so they compile once per model (XLA:CPU takes seconds for them) and
  every later run reads them from the compilation cache; every scheme starts from the same values.

  Args:
    abstract: return shape/dtype/sharding structs instead of arrays (to compile, not to run).

  Returns:
    (state, specs): the sharded TrainState and its PartitionSpecs.
  """
  # The whole network's initial state (its shapes only, when abstract).
  if abstract:
    whole = jax.eval_shape(lambda: create_unsharded(model, tx, image_shape, seed=seed))
  else:
    whole = initialize(model, tx, image_shape, seed=seed, device=local_device(mesh))
  specs = state_specs(whole, plan, tx=tx, classifier=model.arch.fc_names()[-1])
  shardings = mesh_lib.shardings(mesh, specs)
  if abstract:
    return sharded_structs(whole, shardings), specs
  # Each process fills its own devices' shards (so it also works when the mesh spans processes).
  place = lambda x, sharding: jax.make_array_from_callback(x.shape, sharding, lambda i: x[i])
  return jax.tree.map(place, whole, shardings), specs


def sharded_structs(shapes, shardings):
  """Shape/dtype structs of `shapes` with `shardings`: a state to compile for, not to run."""
  return jax.tree.map(lambda x, sharding: jax.ShapeDtypeStruct(x.shape, x.dtype,
                                                               sharding=sharding),
                      shapes, shardings)


def local_device(mesh) -> jax.Device:
  """The first device of `mesh` that belongs to this process."""
  return next(d for d in mesh.devices.flat if d.process_index == jax.process_index())


def initialize(model: models.Network, tx, image_shape, *, seed: int,
               device: jax.Device | None = None) -> TrainState:
  """`create_unsharded` on `device` (default: the first), in numpy.

  The random initialisers are one compiled program per model and image size — the same for every
  seed, mesh, scheme, batch and optimiser (the seed's key is its argument), so a later run in this
  process calls it again without tracing it, and a later process reads it from the compilation
  cache (op by op, each of their operations would compile on its own).
  """
  device = device or jax.devices()[0]
  # A key's type names its implementation (JAX's default, which a benchmark may change): each
  # implementation has a program of its own.
  variables = _initializer(model.clone(layout=models.Layout()), tuple(image_shape[1:]), device)(
      jax.device_put(jax.random.key(seed), device))
  # Zeros and constants, op by op: JAX compiles each operation once per shape for the whole
  # process, where a jit of this would be traced and looked up again for every new optimiser.
  return jax.device_get(from_variables(variables, tx, seed=seed))


@functools.lru_cache(maxsize=16)
def _initializer(model: models.Network, image_hwc: tuple, device: jax.Device):
  """The jitted `initial_variables` of one model and image shape on `device`, of the run's root
  key (it holds the compiled program, never the values it made)."""
  return compiler_options.jit_initializer(
      lambda key: initial_variables(model, (1,) + image_hwc, key=key), device,
      out_shardings=jax.sharding.SingleDeviceSharding(device))
