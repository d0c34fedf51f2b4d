"""A-SGD with a parameter server (Paine et al. 2013; DistBelief), emulated deterministically.

`parallelism = "asgd"` on a D × 1 mesh. The server's parameters θ_ps are kept whole on
every device (a replicated copy stands in for the server process). Each of the D clients runs SGD
on its shard of the global batch with its own optimiser state (momentum), and accumulates its
parameter change Δ_i since its last push. Client i

  pushes  after update t when (t + o_i) mod n_push = 0:   θ_ps ← θ_ps + s·Δ_i,  Δ_i ← 0;
  fetches after update t when (t + o_i) mod n_fetch = 0:  θ_i ← θ_ps (after that step's pushes),

with offsets o_i = ⌊i · n_push / D⌋ when `stagger` is on (clients push on different steps, as
unsynchronised clients would) and 0 otherwise. Paine et al. use n_fetch = n_push = n_sync.
`asgd_phases = "random"` draws each staggered client's offset instead, uniform on 0 … n_push − 1
from the run's seed: lock-step clients whose phases are not spread evenly.

The server's rule (`asgd_server_rule`) sets s: "sum" (s = 1) applies every client's change as it
arrives, as DistBelief's Downpour SGD and Paine's cuda-convnet clients did; "average" (s = 1/D)
applies the clients' mean. The default is "average": a config's learning rate means the same
under every scheme (the rate of its global batch), and with n_push = n_fetch = 1 and no stagger
"average" is synchronous data-parallel SGD at that rate exactly, where "sum" takes D times its
step. Each client's change includes its weight decay, so under "sum" the server decays D times as
fast as one client would; under "average", once. Summing at rate η/D is averaging at η only to
first order: once pushes are stale, an averaged client's own steps, at the full rate, pull it
towards its own minimum (which bounds its change), a summed client's D-times smaller ones do not
and the server adds them whole: on ½θ² a stale sum's stability limit is about half a stale
mean's (tests/asgd_test.py); on the network the sum fell short by more (docs/asynchronous.md).

Each change is pushed once (Δ_i is cleared by its push). What staleness does with momentum is
delayed feedback: a gradient enters the client's velocity and keeps moving its parameters for
about 1/(1 − β) steps, through fetches (the velocity is the client's own), so every push carries
the tails of gradients taken from parameters up to n_fetch + 1/(1 − β) steps old, and the D
clients' tails add up on the server (tests/asgd_test.py shows both on ½θ²).

Clients at their own speeds (`asgd_step_times`). Each client's k-th step takes a time drawn
from a stated distribution, in units of the mean client step:

  equal         every step 1: all clients advance in lock-step (the rules above, exactly).
  spread        client i's every step takes s_i, drawn once per client uniform on [0.5, 1.5]
                (clients of unequal hardware).
  straggler     every step 1, but the last client's 4 (one machine four times slower).
  heavy_tailed  each step of each client drawn anew, lognormal with σ = asgd_heavy_tail_sigma
                (1 by default) and mean 1 (at σ = 1: median 0.61, one step in a hundred over 6.2:
                contention, preemption, slow reads).

The draws are a pure function of the run's seed (`make_sync(seed=)`). A client's pushes and
fetches follow its own step count (its k-th step as the update t above), so a fast client pushes
more often, in time, and contributes more updates. The clients' step completions are events in
time; the server applies pushes in their arrival order. A program step is one *round* of
consecutive events (`next_round`): each client completes at most one step in it (the others
compute nothing, `core.make_step` skipping their step, and keep their parameters, momentum and
pending change as they were), and its meetings (pushes, fetches) all happen at one instant, so a fetch sees every
push that arrived at or before it and none after. With equal step times every round is every
client at the same instant: today's lock-step schedule, each program step one step of every
client. A push's staleness is the number of pushes the server applied since the pushing client
last fetched (pushes at the same instant not counted); `timeline` replays the same rounds on the
host and returns each push's staleness, each client's steps and each round's time, which a run
saw exactly. Step times do not change the learning-rate schedule, which follows each client's
own step count (its optimiser's). Pushes are emulated with one all-reduce of the pushing
clients' Δ (zeros from the others), which moves more bytes than point-to-point pushes.

A client's step takes the images of the program step (round) it runs in: a client outside a round
skips that round's images, so drawn step times change each client's data order as well as its
pushes. `asgd_data_order` separates the two: with equal step times and an in-memory dataset,
"heavy_tailed" (or "spread", "straggler") feeds each client's k-th step the images of the round
in which it would take its k-th step at those step times (`data_steps`, the same seed), so that
lock-step clients see a drawn run's data order; "own" (the default) is the program step's. The
dropout masks stay the program step's.

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
import numpy as np

from hybrid_parallel.checks import boolean, integer, number, one_of, setting
from hybrid_parallel.errors import UserError
from hybrid_parallel.local_sgd import core
from hybrid_parallel.mesh import DATA


SERVER_RULES = ("average", "sum")  # the server's share of a push (module docstring).
STEP_TIMES = ("equal", "spread", "straggler", "heavy_tailed")  # the module docstring's.
SPREAD = (0.5, 1.5)  # `spread`: each client's step time, uniform on this range (mean 1).
STRAGGLER_SLOWDOWN = 4.0  # `straggler`: the last client's step time.
HEAVY_TAIL_SIGMA = 1.0  # `heavy_tailed`'s default lognormal σ of each step time, its mean 1.
PHASES = ("even", "random")  # staggered clients' offsets (module docstring).
DATA_ORDERS = ("own",) + STEP_TIMES[1:]  # `asgd_data_order`: the run's own, or a drawn run's.
_PHASE_STREAM = 0x50484153  # folded into the seed's key for the phases: apart from the clients'.


def client_init(params):
  """Each client starts with nothing to push."""
  return {"pending": jax.tree.map(jnp.zeros_like, params)}


def clock_init(settings: "Settings", replicas: int, *, seed: int) -> dict:
  """Every client starts its first step at time 0; no steps, no pushes yet.

  next: when each client's step in progress ends; steps: the steps each has completed; version:
  the pushes the server has applied; read: the version each client last fetched."""
  first = step_durations(settings.asgd_step_times, seed=seed, clients=jnp.arange(replicas),
                         step=1, heavy_tail_sigma=settings.asgd_heavy_tail_sigma)
  return {"next": first, "steps": jnp.zeros((replicas,), jnp.int32),
          "version": jnp.zeros((), jnp.int32), "read": jnp.zeros((replicas,), jnp.int32)}


def shared_init(params):
  """The server starts from the common initialisation (`make_sync`'s adds the clients' clock)."""
  return {"server": params}


def step_durations(step_times: str, *, seed: int, clients, step,
                   heavy_tail_sigma: float = HEAVY_TAIL_SIGMA):
  """How long step `step` (1, 2, …: one for all, or one per client) of each of `clients` takes,
  in mean client steps (the module docstring's distributions)."""
  clients = jnp.asarray(clients)
  key = jax.random.PRNGKey(seed)
  per_client = jax.vmap(lambda c: jax.random.fold_in(key, c))(clients)
  if step_times == "equal":
    return jnp.ones(clients.shape, jnp.float32)
  if step_times == "spread":
    return jax.vmap(lambda k: jax.random.uniform(k, (), jnp.float32, *SPREAD))(per_client)
  if step_times == "straggler":
    return jnp.where(clients == clients.shape[0] - 1, STRAGGLER_SLOWDOWN, 1.0).astype(jnp.float32)
  if step_times == "heavy_tailed":
    steps = jnp.broadcast_to(jnp.asarray(step, jnp.int32), clients.shape)
    z = jax.vmap(lambda k, s: jax.random.normal(jax.random.fold_in(k, s), (), jnp.float32))(
        per_client, steps)
    return jnp.exp(heavy_tail_sigma * z - heavy_tail_sigma ** 2 / 2)
  raise ValueError(step_times)


def offsets(settings: "Settings", replicas: int, *, seed: int):
  """Each client's phase o_i (module docstring): 0 unstaggered; ⌊i · n_push / D⌋ ("even"), or
  drawn uniform on 0 … n_push − 1 from `seed` ("random")."""
  clients = jnp.arange(replicas)
  if not settings.asgd_stagger:
    return jnp.zeros((replicas,), jnp.int32)
  if settings.asgd_phases == "random":
    key = jax.random.fold_in(jax.random.PRNGKey(seed), _PHASE_STREAM)
    return jax.random.randint(key, (replicas,), 0, settings.n_push, jnp.int32)
  return (clients * settings.n_push) // replicas


def next_round(clock: dict, settings: "Settings", replicas: int, *, seed: int):
  """The next round of events after `clock`: the clients' step completions in time order, as
  many as can share a program step — each client once, and every meeting at one instant.

  Returns:
    (clock after the round, events): events' `active`, `push`, `fetch` (bool per client),
    `staleness` (per client; meaningful where it pushes) and `time` (the round's last event).
  """
  clients = jnp.arange(replicas)
  phase = offsets(settings, replicas, seed=seed)
  # The client's update number, counting the warm start's (the lock-step rule's t).
  update = settings.warm_start_steps + clock["steps"] + 1
  pushes = (update + phase) % settings.n_push == 0
  fetches = (update + phase) % settings.n_fetch == 0
  ends = clock["next"]
  following = ends + step_durations(settings.asgd_step_times, seed=seed, clients=clients,
                                    step=clock["steps"] + 2,
                                    heavy_tail_sigma=settings.asgd_heavy_tail_sigma)
  order = jnp.argsort(ends, stable=True)

  def take(position, carry):
    active, bound, meeting_time, open_ = carry
    c = order[position]
    meets = pushes[c] | fetches[c]
    fits = open_ & (ends[c] < bound) & (
        ~meets | jnp.isnan(meeting_time) | (ends[c] == meeting_time))
    return (active.at[c].set(fits), jnp.where(fits, jnp.minimum(bound, following[c]), bound),
            jnp.where(fits & meets, ends[c], meeting_time), fits)

  active = jax.lax.fori_loop(0, replicas, take, (
      jnp.zeros((replicas,), bool), jnp.float32(jnp.inf), jnp.float32(jnp.nan), True))[0]
  push, fetch = active & pushes, active & fetches
  version = clock["version"] + jnp.sum(push, dtype=jnp.int32)
  events = {"active": active, "push": push, "fetch": fetch,
            "staleness": clock["version"] - clock["read"],
            "time": jnp.max(jnp.where(active, ends, -jnp.inf))}
  clock = {"next": jnp.where(active, following, ends), "steps": clock["steps"] + active,
           "version": version, "read": jnp.where(fetch, version, clock["read"])}
  return clock, events


def timeline(settings: "Settings", replicas: int, *, seed: int, rounds: int) -> dict:
  """The rounds a run of `rounds` program steps makes after its warm start (`next_round`, the
  same code), on the host: numpy arrays over rounds of each event (`active`, `push`, `fetch`,
  `staleness`: [rounds, replicas]; `time`: [rounds])."""
  def body(clock, _):
    return next_round(clock, settings, replicas, seed=seed)
  _, events = jax.jit(lambda: jax.lax.scan(body, clock_init(settings, replicas, seed=seed), None,
                                           length=rounds))()
  return jax.tree.map(np.asarray, events)


def rounds_for(settings: "Settings", replicas: int, *, seed: int, time: float) -> int:
  """The program steps after the warm start whose events all end by `time` (mean client steps):
  `time` itself for equal step times."""
  rounds = int(time) * replicas
  events = timeline(settings, replicas, seed=seed, rounds=rounds)
  return int(np.sum(events["time"] <= time))


def data_steps(settings: "Settings", replicas: int, *, seed: int, steps: int) -> np.ndarray:
  """The program step (0-based) whose batch each client's k-th step takes, for k = 1 … `steps`:
  [steps, replicas]. Its own program step under `asgd_data_order = "own"`; otherwise, after the
  warm start, the round in which the client takes its k-th step when its step times are drawn
  as `asgd_data_order` names (the same seed, phases and meetings: `timeline`)."""
  own = np.broadcast_to(np.arange(steps)[:, None], (steps, replicas))
  warm = min(settings.warm_start_steps, steps)
  if settings.asgd_data_order == "own" or steps == warm:
    return own.copy()
  drawn = dataclasses.replace(settings, asgd_step_times=settings.asgd_data_order,
                              asgd_data_order="own")
  needed = steps - warm
  # Each round ends at least one client's step: every client has `needed` steps within
  # needed × replicas rounds unless one is more than `replicas` times slower than the mean.
  active = timeline(drawn, replicas, seed=seed, rounds=needed * replicas)["active"]
  if (active.sum(axis=0) < needed).any():
    raise ValueError(f"asgd_data_order {settings.asgd_data_order!r}: a client took fewer than "
                     f"{needed} steps in {needed * replicas} rounds.")
  rounds = np.stack([np.flatnonzero(active[:, c])[:needed] for c in range(replicas)], axis=1)
  return np.concatenate([own[:warm], warm + rounds])


def staleness_summary(events: dict) -> dict:
  """What a run saw, from its `timeline`: its pushes' staleness (mean, quantiles, max), each
  client's steps and pushes, and the time it covered."""
  stale = events["staleness"][events["push"]]
  quantile = lambda q: float(np.quantile(stale, q)) if stale.size else None
  return {"pushes": int(stale.size),
          "staleness_mean": round(float(stale.mean()), 3) if stale.size else None,
          "staleness_quantiles": {"10": quantile(0.1), "50": quantile(0.5),
                                  "90": quantile(0.9)},
          "staleness_max": int(stale.max()) if stale.size else None,
          "client_steps": events["active"].sum(axis=0).tolist(),
          "client_pushes": events["push"].sum(axis=0).tolist(),
          "time": round(float(events["time"][-1]), 3) if len(events["time"]) else 0.0}


@dataclasses.dataclass(frozen=True)
class Settings:
  """A-SGD's pushes and fetches: the config fields of its name, each with its check."""
  n_push: int = setting(integer(1))
  n_fetch: int = setting(integer(1))
  asgd_stagger: bool = setting(boolean)
  warm_start_steps: int = setting(integer(0))
  asgd_warm_start_momentum: bool = setting(boolean)
  asgd_server_rule: str = setting(one_of(SERVER_RULES))
  asgd_step_times: str = setting(one_of(STEP_TIMES))
  asgd_heavy_tail_sigma: float = setting(number(low=0.0, low_open=True), default=HEAVY_TAIL_SIGMA)
  asgd_phases: str = setting(one_of(PHASES), default="even")
  asgd_data_order: str = setting(one_of(DATA_ORDERS), default="own")


def check(settings: Settings, replicas: int) -> None:
  """One UserError for the combinations that mean nothing (random phases without stagger; a
  drawn run's data order under drawn step times); what may not learn is `collapse_warning`'s."""
  del replicas
  if settings.asgd_phases == "random" and not settings.asgd_stagger:
    raise UserError("asgd_phases 'random' draws each staggered client's phase, but asgd_stagger "
                    "is False; set asgd_stagger = True or asgd_phases = 'even'.")
  if settings.asgd_data_order != "own" and settings.asgd_step_times != "equal":
    raise UserError(f"asgd_data_order {settings.asgd_data_order!r} feeds lock-step clients as "
                    f"if their step times were drawn, but asgd_step_times is "
                    f"{settings.asgd_step_times!r}; set asgd_step_times = 'equal' or "
                    f"asgd_data_order = 'own'.")


@dataclasses.dataclass(frozen=True)
class Collapse:
  """A lock-step A-SGD setting of the study (docs/asynchronous.md: alexnet_tiny on digits, 16
  images a client, a cold start) on which `collapsed` of its `seeds` ended below twice chance
  (20% test top-1)."""
  server_rule: str
  momentum: float
  clients: int
  n_sync: int
  effective_step: float  # the server's: each client's η / (1 − β), × the clients when summed.
  collapsed: int
  seeds: int


# The study's measured boundary, copied from docs/asynchronous.json's "boundary"
# (benchmarks/papers/asynchronous_findings.boundary; tests/asynchronous_study_test.py holds the
# two equal).
MEASURED_BOUNDARY = tuple(Collapse(*fields) for fields in (
    ("average", 0.0, 8, 4, 0.25, 1, 5),
    ("average", 0.0, 8, 1, 0.5, 4, 5),
    ("average", 0.0, 8, 4, 1.0, 5, 5),
    ("average", 0.9, 8, 1, 1.0, 3, 10),
    ("average", 0.9, 8, 32, 1.0, 5, 5),
    ("sum", 0.9, 8, 32, 0.0625, 3, 5),
    ("sum", 0.9, 2, 4, 0.25, 1, 5),
    ("sum", 0.9, 8, 4, 0.25, 3, 5),
    ("sum", 0.9, 4, 4, 0.5, 5, 5),
))


def collapse_warning(settings: Settings, replicas: int, *, learning_rate: float,
                     momentum: float) -> str | None:
  """One sentence when A-SGD at these settings is at least as far out as a measured collapse,
  whole or partial: the same server rule, as many clients or more, n_sync as large or larger,
  and an effective step η/(1 − β) as large or larger (the server's: D times each client's when
  it sums) — each of which the study found to make A-SGD less stable, not more — at the
  momentum measured nearest below (the study measured 0 and 0.9; momentum helped at equal
  effective step, so a momentum between is held to the lower one's boundary, one above 0.9
  to 0.9's, an extrapolation, and one below every momentum measured for its server rule to the
  lowest one's: a summing server was measured at 0.9 only). The entry with the largest share of
  collapsed seeds is named.
  None otherwise. A warning, not a refusal: the measurements are one network on one data set."""
  n_sync = max(settings.n_push, settings.n_fetch)
  rule = settings.asgd_server_rule
  step = learning_rate / (1 - momentum) * (replicas if rule == "sum" else 1)
  measured = sorted({c.momentum for c in MEASURED_BOUNDARY if c.server_rule == rule})
  if not measured:
    return None
  # A momentum below every measured one (a summing server was measured at 0.9 only) is held to
  # the lowest measured one's boundary: leaving it unjudged would warn about nothing.
  held_to = max([m for m in measured if m <= momentum], default=measured[0])
  matches = [c for c in MEASURED_BOUNDARY
             if c.server_rule == rule and c.momentum == held_to and replicas >= c.clients and
             n_sync >= c.n_sync and step >= c.effective_step - 1e-9]
  if not matches:
    return None
  c = max(matches, key=lambda c: (c.collapsed / c.seeds, c.effective_step))
  reading = {"average": "averaging", "sum": "summing"}[rule]
  return (f"asgd with {replicas} clients, the server {reading}, at n_sync {n_sync}, momentum "
          f"{momentum:g} and an effective step η/(1−β) of {step:.3g} is at least as far out as a "
          f"setting on which {c.collapsed} of {c.seeds} seeds ended below 20% test top-1 in "
          f"docs/asynchronous.md's study ({c.clients} clients, n_sync {c.n_sync}, momentum "
          f"{c.momentum:g}, the server's η/(1−β) {c.effective_step:g}, alexnet_tiny on digits): "
          f"it may not learn; lower base_learning_rate or n_push and n_fetch.")


def make_sync(settings: Settings, replicas: int, *, seed: int = 0) -> core.Sync:
  """The push / fetch rules of the module docstring, at step times drawn from `seed`; evaluates
  the server's parameters."""
  warm_start_steps = settings.warm_start_steps
  share = 1.0 / replicas if settings.asgd_server_rule == "average" else 1.0
  equal = settings.asgd_step_times == "equal"

  def apply(local, client, shared, previous, step):
    i = core.replica_index()

    def asynchronous(_):
      clock, events = next_round(shared["clock"], settings, replicas, seed=seed)
      active, pushing, fetching = events["active"][i], events["push"][i], events["fetch"][i]
      if equal:  # every client is in every round: the lock-step arithmetic, unmasked.
        stepped = local
        pending = jax.tree.map(lambda p, new, old: p + (new - old), client["pending"],
                               local.params, previous.params)
      else:  # a client whose step does not end in this round keeps what it had.
        stepped = jax.tree.map(lambda new, old: jnp.where(active, new, old), local, previous)
        pending = jax.tree.map(lambda p, new, old: p + jnp.where(active, new - old, 0.0),
                               client["pending"], local.params, previous.params)
      pushed = jax.tree.map(lambda d: jax.lax.psum(jnp.where(pushing, d, 0.0), DATA), pending)
      server = jax.tree.map(lambda s, d: s + share * d, shared["server"], pushed)
      left = jax.tree.map(lambda d: jnp.where(pushing, 0.0, d), pending)
      params = jax.tree.map(lambda s, p: jnp.where(fetching, s, p), server, stepped.params)
      return (stepped.replace(params=params), {"pending": left},
              {"server": server, "clock": clock})

    def warm_start(_):
      first = core.from_replica_zero(local)
      if not settings.asgd_warm_start_momentum:  # the clients' velocities start from zero.
        last = step == warm_start_steps
        first = first.replace(opt_state=core.floats(
            lambda x: jnp.where(last, jnp.zeros_like(x), x))(first.opt_state))
      zeros = jax.tree.map(jnp.zeros_like, client["pending"])
      return first, {"pending": zeros}, {"server": first.params, "clock": shared["clock"]}

    return jax.lax.cond(step <= warm_start_steps, warm_start, asynchronous, None)

  def steps(shared, step):
    """Whether this client's step ends in this program step (always in the warm start, where
    client 0's is copied to all, and with equal step times)."""
    _, events = next_round(shared["clock"], settings, replicas, seed=seed)
    return (step <= warm_start_steps) | events["active"][core.replica_index()]

  def shared_init_with_clock(params):
    """The server starts from the common initialisation; the clients' clock at time 0."""
    return {"server": params, "clock": clock_init(settings, replicas, seed=seed)}

  return core.Sync(apply=apply, eval_params=eval_params, client_init=client_init,
                   shared_init=shared_init_with_clock,
                   steps=None if equal else steps)


def eval_params(state: core.ReplicaState):
  """The server's parameters: what the clients would fetch."""
  return state.shared["server"]
