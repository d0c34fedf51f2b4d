"""Local SGD on D data replicas: the shared core of model averaging and A-SGD.

Each replica ("client") holds its own parameters and optimiser state and takes SGD steps on its
shard of the global batch, with the loss averaged over that shard. A scheme is a `Sync`: what
runs after every local update (averaging, parameter-server push / fetch), the state it keeps
and the model it evaluates.

State layout: every leaf of the single-device TrainState (parameters, optimiser state) is stacked
on a new leading axis of size D, sharded over "data" — replica i's copy lives on device i. All
replicas start from the same single-device initialisation.
"""

import dataclasses
from collections.abc import Callable

import flax.struct
import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec as P

from hybrid_parallel import compiler_options, models, partitioning, train_state
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel.mesh import DATA
from hybrid_parallel.steps import common


class Replica(flax.struct.PyTreeNode):
  """What differs between replicas: parameters and optimiser state."""
  params: dict
  opt_state: optax.OptState


class ReplicaState(flax.struct.PyTreeNode):
  """Per-replica state (stacked over "data") plus whatever the scheme shares.

  Attributes:
    step: updates taken so far (the same on every replica).
    local: the replicas' parameters and optimiser state, each leaf with a leading axis of size D.
    client: the scheme's other per-replica state, stacked the same way (A-SGD: pending updates).
    shared: scheme state kept whole on every device (A-SGD: the server's parameters).
    rng: the run's root key data, as in TrainState.
  """
  step: jax.Array
  local: Replica
  client: dict
  shared: dict
  rng: jax.Array


@dataclasses.dataclass(frozen=True)
class Sync:
  """How the replicas of a local-SGD scheme meet.

  Attributes:
    apply: `(local, client, shared, previous, step) -> (local, client, shared)`, run on
      each device after its local update, inside a shard_map over "data" without replication
      checks (it may use ppermute); `local` (a Replica, after the update), `previous` (the
      Replica before it) and `client` are this replica's (unstacked) state, `step` the number
      of program steps now taken. What it returns as `shared`
      must be the same on every device.
    eval_params: `ReplicaState -> params`: the model to evaluate, whole on every device.
    client_init: `params -> one replica's extra state` (stacked for all); None: empty.
    shared_init: `params -> the replicated scheme state`; None: empty.
    steps: `(shared, step) -> bool`, inside the shard_map: whether this replica takes a step
      in program step `step` (A-SGD's clients at their own speeds); a replica that does not
      skips its gradient, and `apply` receives its state unchanged. None: every replica steps.
  """
  apply: Callable
  eval_params: Callable
  client_init: Callable | None = None
  shared_init: Callable | None = None
  steps: Callable | None = None


def create(model: models.Network, plan: partitioning.Plan, mesh, *, tx, image_shape, seed: int,
           sync: Sync, abstract: bool = False):
  """Every replica starts from the single-device initialisation (`abstract`: shape structs).

  Returns:
    (state, specs): the ReplicaState on the mesh and its PartitionSpecs.
  """
  replicas = plan.data

  def replicate(state):  # one replica's start, stacked for all, and the scheme's own state.
    stack = lambda tree: jax.tree.map(
        lambda x: jnp.broadcast_to(x[None], (replicas,) + x.shape), tree)
    client = sync.client_init(state.params) if sync.client_init else {}
    shared = sync.shared_init(state.params) if sync.shared_init else {}
    return ReplicaState(step=state.step, local=stack(Replica(state.params, state.opt_state)),
                        client=stack(client), shared=shared, rng=state.rng)

  shapes = jax.eval_shape(
      lambda: replicate(train_state.create_unsharded(model, tx, image_shape, seed=seed)))
  per_replica = lambda tree: jax.tree.map(lambda _: P(DATA), tree)
  specs = ReplicaState(step=P(), local=per_replica(shapes.local),
                       client=per_replica(shapes.client),
                       shared=jax.tree.map(lambda _: P(), shapes.shared), rng=P())
  shardings = mesh_lib.shardings(mesh, specs)
  if abstract:
    return train_state.sharded_structs(shapes, shardings), specs
  # The random initialisation is the synchronous schemes' own program (train_state.initialize:
  # compiled once per model, whatever the mesh, batch and optimiser); only the cheap stacking is
  # compiled for this mesh.
  whole = train_state.initialize(model, tx, image_shape, seed=seed,
                                 device=train_state.local_device(mesh))
  return compiler_options.jit_initializer(replicate, mesh, out_shardings=shardings)(whole), specs


def make_step(model: models.Network, plan: partitioning.Plan, mesh, *, tx, specs: ReplicaState,
              sync: Sync, tune_xla_cpu: bool = True):
  """Returns `step(state, images, labels) -> (state, metrics)`: local SGD, then `sync.apply`.

  `tune_xla_cpu`: compile with `compiler_options`' CPU step options.
  """

  def per_device_step(state: ReplicaState, images_BHWC, labels_B):
    local, client = jax.tree.map(lambda x: x[0], (state.local, state.client))
    local_batch = images_BHWC.shape[0]
    batch = common.DeviceBatch(images_BHWC, labels_B, common.example_ids(plan, local_batch))
    new_step = state.step + 1

    def local_step(local):
      # The replica's own mean loss (no batch norm: the local-SGD schemes refuse it).
      out = common.loss_and_grads(model, local.params, batch, batch_stats={},
                                  key=common.dropout_key(state), normaliser=local_batch)
      updates, opt_state = tx.update(out.grads, local.opt_state, local.params)
      return Replica(optax.apply_updates(local.params, updates), opt_state), out.loss, out.correct

    if sync.steps is None:
      updated, loss, correct = local_step(local)
      stepped = plan.data
    else:  # a replica whose step does not end in this program step computes nothing.
      stepping = sync.steps(state.shared, new_step)
      _, loss_shape, correct_shape = jax.eval_shape(local_step, local)
      updated, loss, correct = jax.lax.cond(
          stepping, local_step, lambda local: (local, jnp.zeros((), loss_shape.dtype),
                                               jnp.zeros((), correct_shape.dtype)), local)
      stepped = jnp.maximum(jax.lax.psum(stepping.astype(jnp.int32), DATA), 1)
    updated, client, shared = sync.apply(updated, client, state.shared, local, new_step)
    # The mean over the replicas that stepped.
    metrics = common.step_metrics(loss=jax.lax.psum(loss, DATA) / stepped,
                                  correct=jax.lax.psum(correct, DATA),
                                  examples=local_batch * stepped)
    restack = lambda tree: jax.tree.map(lambda x: x[None], tree)
    return state.replace(step=new_step, local=restack(updated), client=restack(client),
                         shared=shared), metrics

  batch = plan.batch_spec
  return compiler_options.jit(jax.shard_map(per_device_step, mesh=mesh,
                                            in_specs=(specs, batch, batch),
                                            out_specs=(specs, P()), check_vma=False), mesh,
                              tuned=tune_xla_cpu, donate_argnums=0)


def replica_index() -> jax.Array:
  return jax.lax.axis_index(DATA)


def from_replica_zero(tree):
  """Every replica gets replica 0's values (one all-reduce of a masked copy)."""
  first = replica_index() == 0
  return jax.tree.map(lambda x: jax.lax.psum(jnp.where(first, x, jnp.zeros_like(x)), DATA), tree)


def floats(fn):
  """`fn` on floating-point leaves; integer leaves (optax's step counts) pass through."""
  return lambda tree: jax.tree.map(
      lambda x: fn(x) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)
