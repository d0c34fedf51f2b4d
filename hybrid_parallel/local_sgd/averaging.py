"""Model averaging (Su, Chen & Morgan): local SGD, parameters averaged every `sync_every` steps.

`parallelism = "averaging"` on a D × 1 mesh. Every replica runs SGD on its shard of the
global batch; after every `sync_every`-th update the replicas' parameters (and, with
`average_momentum`, their momentum buffers) are mixed by `average_method`. With `sync_every = 1`,
`allreduce` and averaged momentum this is exactly synchronous data-parallel SGD.

Methods (θ_i: replica i's parameters; s: how many syncs came before this one; D replicas):

  allreduce     θ_i ← (1/D) Σ_j θ_j with XLA's all-reduce: the exact mean.
  ring          the same exact mean, computed by the ring all-reduce of `collectives.ring`
                (reduce-scatter + all-gather; Su et al.'s "ring reduce").
  butterfly     butterfly mixing (Zhao & Canny 2013): one butterfly stage per sync,
                θ_i ← (θ_i + θ_{i XOR 2^k}) / 2 with k = s mod lg D. One message of the whole model
                per replica per sync; lg D consecutive syncs with no local steps between them give
                the exact mean. D must be a power of two.
  hopping_ring  one ring stage per sync with a hop that doubles: θ_i ← (θ_i + θ_{(i − h) mod D})
                / 2 with h = 2^(s mod ⌈lg D⌉). One message per replica per sync, any D; for D a
                power of two, lg D consecutive syncs give the exact mean (each replica has then
                averaged D consecutive ring positions). The source paper names this method but its
                text gives no definition; this is ours.
"""

import dataclasses
import math

import jax
import jax.numpy as jnp

from hybrid_parallel import collectives
from hybrid_parallel.checks import boolean, integer, one_of, setting
from hybrid_parallel.errors import UserError
from hybrid_parallel.local_sgd import core
from hybrid_parallel.mesh import DATA

METHODS = ("allreduce", "ring", "butterfly", "hopping_ring")


def _stages(replicas: int) -> int:
  return max(1, math.ceil(math.log2(replicas)))


def _pair_mean(x, perm):
  return (x + jax.lax.ppermute(x, DATA, perm)) / 2


def mix(tree, method: str, *, replicas: int, sync_index):
  """One sync of `method` over the "data" axis (inside a shard_map); see the module docstring
  (`check` says which methods and replica counts are possible)."""
  if replicas == 1:
    return tree
  if method == "allreduce":
    return core.floats(lambda x: jax.lax.psum(x, DATA) / replicas)(tree)
  if method == "ring":
    return core.floats(lambda x: collectives.ring(x, DATA) / replicas)(tree)
  stage = sync_index % _stages(replicas)
  if method == "butterfly":
    perms = [[(j, j ^ (1 << k)) for j in range(replicas)] for k in range(_stages(replicas))]
  else:  # hopping_ring
    perms = [[(j, (j + (1 << k)) % replicas) for j in range(replicas)]
             for k in range(_stages(replicas))]
  branches = [core.floats(lambda x, perm=perm: _pair_mean(x, perm)) for perm in perms]
  return jax.lax.switch(stage, branches, tree)


@dataclasses.dataclass(frozen=True)
class Settings:
  """Model averaging's meetings: the config fields of its name, each with its check."""
  average_method: str = setting(one_of(METHODS))
  sync_every: int = setting(integer(1))
  average_momentum: bool = setting(boolean)


def check(settings: Settings, replicas: int) -> None:
  """One UserError for a method (one of `METHODS`) that cannot mix this many replicas."""
  if settings.average_method == "butterfly" and replicas & (replicas - 1):
    raise UserError(f"butterfly mixing needs a power-of-two number of replicas, got mesh.data = "
                    f"{replicas}; use hopping_ring, ring or allreduce.")


def make_sync(settings: Settings, replicas: int, *, seed: int = 0) -> core.Sync:
  """Mixes the parameters (and momentum) after every sync_every-th step; evaluates the mean.
  `seed` is unused: every replica steps every step."""
  del seed
  method, sync_every = settings.average_method, settings.sync_every

  def apply(local, client, shared, previous, step):
    del previous

    def average(local):
      sync_index = step // sync_every - 1
      mixed = local.replace(params=mix(local.params, method, replicas=replicas,
                                       sync_index=sync_index))
      if settings.average_momentum:
        mixed = mixed.replace(opt_state=mix(local.opt_state, method, replicas=replicas,
                                            sync_index=sync_index))
      return mixed

    local = jax.lax.cond(step % sync_every == 0, average, lambda x: x, local)
    return local, client, shared

  return core.Sync(apply=apply, eval_params=jax.jit(eval_params))


def eval_params(state: core.ReplicaState):
  """The replicas' mean: the model a user would keep (exact right after an allreduce sync)."""
  return jax.tree.map(lambda x: jnp.mean(x, axis=0), state.local.params)
