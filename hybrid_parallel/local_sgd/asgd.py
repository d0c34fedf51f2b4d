"""A-SGD with a parameter server (Paine et al. 2013; DistBelief), emulated deterministically.

`parallelism = "asgd"` on a D × 1 mesh. The server's parameters θ_ps are kept whole on
every device (a replicated copy stands in for the server process). Each of the D clients runs SGD
on its shard of the global batch with its own momentum, and accumulates its parameter change
Δ_i since its last push. Client i

  pushes  after update t when (t + o_i) mod n_push = 0:   θ_ps ← θ_ps + Δ_i,  Δ_i ← 0;
  fetches after update t when (t + o_i) mod n_fetch = 0:  θ_i ← θ_ps (after that step's pushes),

with offsets o_i = ⌊i · n_push / D⌋ when `stagger` is on (clients push on different steps, as
unsynchronised clients would) and 0 otherwise. Paine et al. use n_fetch = n_push = n_sync.

Staleness: a staggered client's push carries up to n_push local updates computed from parameters
fetched up to n_fetch steps earlier, while the other D − 1 clients' pushes have moved θ_ps in the
meantime; with stagger, pushes reach the server at D different phases of each n_push-step period.

How this differs from a truly asynchronous system: all clients advance in lock-step (one update
each per step) and the order of pushes and fetches is fixed by the offsets, so staleness is
deterministic and the run is reproducible; real clients run at their own speeds, so staleness
varies and slow clients push older updates. Pushes are emulated with one all-reduce of the
pushing clients' Δ (zeros from the others), which moves more bytes than point-to-point pushes.

`warm_start_steps`: for the first W updates only client 0 trains (on its shard); every update is
copied to all clients and to the server, as in Paine et al.'s warm-start experiment (a model
trained on one GPU first).

With D = 1 this is single-device SGD; with n_push = n_fetch = 1 and no stagger it is synchronous
data-parallel SGD whose update is the *sum* of the clients' updates.
"""

import dataclasses

import jax
import jax.numpy as jnp

from hybrid_parallel.checks import boolean, integer, setting
from hybrid_parallel.local_sgd import core
from hybrid_parallel.mesh import DATA


def client_init(params):
  """Each client starts with nothing to push."""
  return {"pending": jax.tree.map(jnp.zeros_like, params)}


def shared_init(params):
  """The server starts from the common initialisation."""
  return {"server": params}


@dataclasses.dataclass(frozen=True)
class Settings:
  """A-SGD's pushes and fetches: the config fields of its name, each with its check."""
  n_push: int = setting(integer(1))
  n_fetch: int = setting(integer(1))
  asgd_stagger: bool = setting(boolean)
  warm_start_steps: int = setting(integer(0))


def check(settings: Settings, replicas: int) -> None:
  """Every combination of valid settings works (nothing to refuse)."""
  del settings, replicas


def make_sync(settings: Settings, replicas: int) -> core.Sync:
  """The push / fetch rules of the module docstring; evaluates the server's parameters."""
  n_push, n_fetch = settings.n_push, settings.n_fetch
  stagger, warm_start_steps = settings.asgd_stagger, settings.warm_start_steps

  def apply(local, client, shared, previous_params, step):
    i = core.replica_index()
    offset = (i * n_push) // replicas if stagger else 0
    pending = jax.tree.map(lambda p, new, old: p + (new - old), client["pending"], local.params,
                           previous_params)

    def asynchronous(_):
      pushing = (step + offset) % n_push == 0
      fetching = (step + offset) % n_fetch == 0
      pushed = jax.tree.map(lambda d: jax.lax.psum(jnp.where(pushing, d, 0.0), DATA), pending)
      server = jax.tree.map(jnp.add, shared["server"], pushed)
      left = jax.tree.map(lambda d: jnp.where(pushing, 0.0, d), pending)
      params = jax.tree.map(lambda s, p: jnp.where(fetching, s, p), server, local.params)
      return local.replace(params=params), {"pending": left}, {"server": server}

    def warm_start(_):
      first = core.from_replica_zero(local)
      zeros = jax.tree.map(jnp.zeros_like, pending)
      return first, {"pending": zeros}, {"server": first.params}

    return jax.lax.cond(step <= warm_start_steps, warm_start, asynchronous, None)

  return core.Sync(apply=apply, eval_params=eval_params, client_init=client_init,
                   shared_init=shared_init)


def eval_params(state: core.ReplicaState):
  """The server's parameters: what the clients would fetch."""
  return state.shared["server"]
