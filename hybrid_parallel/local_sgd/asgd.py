"""A-SGD with a parameter server (Paine et al. 2013; DistBelief), emulated deterministically.

`parallelism = "asgd"` on a D × 1 mesh. The server's parameters θ_ps are kept whole on
every device (a replicated copy stands in for the server process). Each of the D clients runs SGD
on its shard of the global batch with its own optimiser state (momentum), and accumulates its
parameter change Δ_i since its last push. Client i

  pushes  after update t when (t + o_i) mod n_push = 0:   θ_ps ← θ_ps + s·Δ_i,  Δ_i ← 0;
  fetches after update t when (t + o_i) mod n_fetch = 0:  θ_i ← θ_ps (after that step's pushes),

with offsets o_i = ⌊i · n_push / D⌋ when `stagger` is on (clients push on different steps, as
unsynchronised clients would) and 0 otherwise. Paine et al. use n_fetch = n_push = n_sync.

The server's rule (`asgd_server_rule`) sets s: "sum" (s = 1) applies every client's change as it
arrives, as DistBelief's Downpour SGD and Paine's cuda-convnet clients did; "average" (s = 1/D)
applies the clients' mean. The default is "average": a config's learning rate means the same
under every scheme (the rate of its global batch), and with n_push = n_fetch = 1 and no stagger
"average" is synchronous data-parallel SGD at that rate exactly, where "sum" takes D times its
step. Each client's change includes its weight decay, so under "sum" the server decays D times as
fast as one client would; under "average", once.

Each change is pushed once (Δ_i is cleared by its push). What staleness does with momentum is
delayed feedback: a gradient enters the client's velocity and keeps moving its parameters for
about 1/(1 − β) steps, through fetches (the velocity is the client's own), so every push carries
the tails of gradients taken from parameters up to n_fetch + 1/(1 − β) steps old, and the D
clients' tails add up on the server (tests/asgd_test.py shows both on ½θ²).

How this differs from a truly asynchronous system: all clients advance in lock-step (one update
each per step) and the order of pushes and fetches is fixed by the offsets, so staleness is
deterministic and the run is reproducible; real clients run at their own speeds, so staleness
varies and slow clients push older updates. Pushes are emulated with one all-reduce of the
pushing clients' Δ (zeros from the others), which moves more bytes than point-to-point pushes.

`warm_start_steps`: for the first W updates only client 0 trains (on its shard); every update is
copied to all clients and to the server, as in Paine et al.'s warm-start experiment (a model
trained on one GPU first). `asgd_warm_start_momentum`: whether the clients then go on with client
0's momentum (its optimiser state, copied with its parameters) or start theirs from zero.

With D = 1 this is single-device SGD; with n_push = n_fetch = 1 and no stagger it is synchronous
data-parallel SGD (its update the clients' mean under "average", their sum under "sum").
"""

import dataclasses

import jax
import jax.numpy as jnp

from hybrid_parallel.checks import boolean, integer, one_of, setting
from hybrid_parallel.local_sgd import core
from hybrid_parallel.mesh import DATA


SERVER_RULES = ("average", "sum")  # the server's share of a push (module docstring).


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
  asgd_warm_start_momentum: bool = setting(boolean)
  asgd_server_rule: str = setting(one_of(SERVER_RULES))


def check(settings: Settings, replicas: int) -> None:
  """Every combination of valid settings runs (nothing to refuse); what may not learn is
  `collapse_warning`'s."""
  del settings, replicas


@dataclasses.dataclass(frozen=True)
class Collapse:
  """An A-SGD setting of the study (docs/asynchronous.md: alexnet_tiny on digits, 16 images a
  client, a cold start) that ended below twice chance (20% test top-1) on every one of its
  seeds."""
  clients: int
  n_sync: int
  momentum: float
  server_rule: str
  effective_step: float  # the server's: each client's η / (1 − β), × the clients when summed.
  seeds: int


# The study's collapses, copied from docs/asynchronous.json's "collapsed"
# (benchmarks/papers/asynchronous_findings.collapsed; tests/asynchronous_study_test.py holds the
# two equal).
MEASURED_COLLAPSES = tuple(Collapse(*fields) for fields in (
    (8, 4, 0.0, "average", 1.0, 5),
    (8, 32, 0.9, "average", 1.0, 5),
    (4, 4, 0.9, "sum", 0.5, 5),
))


def collapse_warning(settings: Settings, replicas: int, *, learning_rate: float,
                     momentum: float) -> str | None:
  """One sentence when A-SGD at these settings is at least as far out as a measured collapse:
  the same server rule and momentum, as many clients or more, n_sync as large or larger, and an
  effective step η/(1 − β) as large or larger (the server's: D times each client's when it sums)
  — each of which the study found to make A-SGD less stable, not more. None otherwise. A
  warning, not a refusal: the measurements are one network on one data set."""
  n_sync = max(settings.n_push, settings.n_fetch)
  step = learning_rate / (1 - momentum) * (replicas if settings.asgd_server_rule == "sum" else 1)
  for c in MEASURED_COLLAPSES:
    if (replicas >= c.clients and n_sync >= c.n_sync and momentum == c.momentum and
        settings.asgd_server_rule == c.server_rule and step >= c.effective_step):
      rule = {"average": "averaging", "sum": "summing"}[settings.asgd_server_rule]
      return (f"asgd with {replicas} clients, the server {rule}, at "
              f"n_sync {n_sync}, momentum {momentum} and an effective step η/(1−β) of "
              f"{step:.3g} is at least as far out as a setting that "
              f"ended below 20% test top-1 on all {c.seeds} seeds of docs/asynchronous.md's "
              f"study ({c.clients} clients, n_sync {c.n_sync}, the server's η/(1−β) "
              f"{c.effective_step:g}, alexnet_tiny on digits): it may not learn; lower "
              f"base_learning_rate or n_push and n_fetch.")
  return None


def make_sync(settings: Settings, replicas: int) -> core.Sync:
  """The push / fetch rules of the module docstring; evaluates the server's parameters."""
  n_push, n_fetch = settings.n_push, settings.n_fetch
  stagger, warm_start_steps = settings.asgd_stagger, settings.warm_start_steps
  share = 1.0 / replicas if settings.asgd_server_rule == "average" else 1.0

  def apply(local, client, shared, previous_params, step):
    i = core.replica_index()
    offset = (i * n_push) // replicas if stagger else 0
    pending = jax.tree.map(lambda p, new, old: p + (new - old), client["pending"], local.params,
                           previous_params)

    def asynchronous(_):
      pushing = (step + offset) % n_push == 0
      fetching = (step + offset) % n_fetch == 0
      pushed = jax.tree.map(lambda d: jax.lax.psum(jnp.where(pushing, d, 0.0), DATA), pending)
      server = jax.tree.map(lambda s, d: s + share * d, shared["server"], pushed)
      left = jax.tree.map(lambda d: jnp.where(pushing, 0.0, d), pending)
      params = jax.tree.map(lambda s, p: jnp.where(fetching, s, p), server, local.params)
      return local.replace(params=params), {"pending": left}, {"server": server}

    def warm_start(_):
      first = core.from_replica_zero(local)
      if not settings.asgd_warm_start_momentum:  # the clients' velocities start from zero.
        last = step == warm_start_steps
        first = first.replace(opt_state=core.floats(
            lambda x: jnp.where(last, jnp.zeros_like(x), x))(first.opt_state))
      zeros = jax.tree.map(jnp.zeros_like, pending)
      return first, {"pending": zeros}, {"server": first.params}

    return jax.lax.cond(step <= warm_start_steps, warm_start, asynchronous, None)

  return core.Sync(apply=apply, eval_params=eval_params, client_init=client_init,
                   shared_init=shared_init)


def eval_params(state: core.ReplicaState):
  """The server's parameters: what the clients would fetch."""
  return state.shared["server"]
