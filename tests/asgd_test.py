"""A-SGD: one client is single-device SGD; n_sync = 1 without stagger is synchronous SGD (the
clients' mean update, or their sum); what staleness does, on ½θ²; clients at their own speeds
(equal speeds are the lock-step schedule bit for bit)."""

import dataclasses
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P
from absl.testing import absltest

from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel import models, train_state
from hybrid_parallel.local_sgd import asgd, core
from hybrid_parallel.mesh import DATA
import experiment
from hybrid_parallel.errors import UserError
from input_pipeline import arrays
from tests import numerics, testing

GLOBAL_BATCH = 16
BATCHES = testing.random_batches(4, GLOBAL_BATCH)
CONFIG = testing.tiny_config(base_learning_rate=0.05, reference_batch_size=GLOBAL_BATCH,
                             lr_decay="constant")


def server(state):
  return jax.tree.map(np.asarray, state.shared["server"])


def single_device(config):
  """The single-device run's parameters, in float32 and in float64 (tests/numerics.py)."""
  _, _, variables = testing.train_steps(
      testing.build("alexnet_tiny", "single", 1, 1, config, GLOBAL_BATCH), BATCHES)
  exact = testing.float64_steps("alexnet_tiny", "single", 1, 1, config, GLOBAL_BATCH, BATCHES)
  return variables["params"], exact[1]["params"]


def simulate(tx, batches, dtype: str, *, replicas: int, n_sync: int):
  """The server's parameters after four independent single-device optax clients (no dropout)
  pushed and fetched by asgd.py's docstring's rules, staggered, the server summing."""
  per_client = GLOBAL_BATCH // replicas
  with jax.enable_x64(dtype == "float64"):
    net = models.build("alexnet_tiny", 10, image_size=64, dropout_rate=0.0, dtype=dtype)
    # numpy, and so the server's bookkeeping below (elementwise, as XLA's): op by op in JAX,
    # each leaf's shape would compile its own add.
    start = train_state.initialize(net, tx, (1, 64, 64, 3), seed=0)
    params = [start.params] * replicas
    opt_states = [start.opt_state] * replicas
    pending = [jax.tree.map(np.zeros_like, start.params)] * replicas
    server_params = start.params
    offsets = [(i * n_sync) // replicas for i in range(replicas)]

    @jax.jit
    def client_step(p, opt_state, pending_update, x, y):
      # One independent client's SGD step (compiled once; its arithmetic is the same eagerly).
      def loss(p):
        logits = net.apply({"params": p}, x, example_ids_B=jnp.arange(len(y)))
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

      updates, opt_state = tx.update(jax.grad(loss)(p), opt_state, p)
      new = optax.apply_updates(p, updates)
      return new, opt_state, jax.tree.map(lambda d, a, b: d + a - b, pending_update, new, p)

    for t, (images, labels) in enumerate(batches, start=1):
      for i in range(replicas):
        rows = slice(i * per_client, (i + 1) * per_client)
        params[i], opt_states[i], pending[i] = client_step(params[i], opt_states[i], pending[i],
                                                           images[rows], labels[rows])
      syncing = [(t + offsets[i]) % n_sync == 0 for i in range(replicas)]
      for i in filter(syncing.__getitem__, range(replicas)):
        server_params = jax.tree.map(np.add, server_params, jax.device_get(pending[i]))
        pending[i] = jax.tree.map(np.zeros_like, start.params)
      params = [server_params if syncing[i] else params[i] for i in range(replicas)]
    return jax.tree.map(np.asarray, server_params)


def quadratic_clients(*, clients: int, n_sync: int, learning_rate: float, momentum: float,
                      steps: int, rule: str = "sum"):
  """A-SGD (asgd.py's own push / fetch, staggered) on ½θ² from θ = 1, every client at
  `learning_rate` with `momentum` (optax): the noiseless case of staleness, every client's
  gradient the same. Returns, per step: the server's θ, each client's θ after the step's
  meetings, each client's momentum buffer, and what the server received."""
  sync = asgd.make_sync(asgd.Settings(n_push=n_sync, n_fetch=n_sync, asgd_stagger=True,
                                      warm_start_steps=0, asgd_warm_start_momentum=True,
                                      asgd_server_rule=rule, asgd_step_times="equal"), clients)
  tx = optax.sgd(learning_rate, momentum=momentum or None)

  def client():
    params = {"theta": jnp.ones(())}
    carry = (core.Replica(params, tx.init(params)), asgd.client_init(params),
             sync.shared_init(params))

    def step(carry, t):
      local, pending, shared = carry
      updates, opt_state = tx.update(local.params, local.opt_state)  # ∇½θ² = θ.
      updated = core.Replica(optax.apply_updates(local.params, updates), opt_state)
      local, pending, new_shared = sync.apply(updated, pending, shared, local, t + 1)
      velocity = jax.tree.leaves(local.opt_state)[0] if momentum else jnp.zeros(())
      received = new_shared["server"]["theta"] - shared["server"]["theta"]
      gather = lambda x: jax.lax.all_gather(x, DATA)
      return (local, pending, new_shared), (new_shared["server"]["theta"],
                                            gather(local.params["theta"]), gather(velocity),
                                            received)

    return jax.lax.scan(step, carry, jnp.arange(steps))[1]

  mesh = mesh_lib.make_mesh(clients, 1)
  run = jax.jit(jax.shard_map(client, mesh=mesh, in_specs=(), out_specs=P(), check_vma=False))
  return jax.tree.map(np.asarray, run())


def quadratic_server(**settings) -> float:
  """|θ_ps| at the end of `quadratic_clients(**settings)`."""
  return float(abs(quadratic_clients(**settings)[0][-1]))


class MechanismTest(absltest.TestCase):
  """What staleness does, on ½θ² through asgd.py's own push and fetch (docs/asynchronous.md)."""

  def test_each_change_reaches_the_server_once(self):
    # One client, n_sync 4, momentum 0.9: at each push the server equals the client's own
    # parameters — its every change added once, none again — and between pushes it stays.
    server, clients, _, received = quadratic_clients(clients=1, n_sync=4, learning_rate=0.1,
                                                     momentum=0.9, steps=12)
    pushes = np.arange(12) % 4 == 3  # after updates 4, 8 and 12.
    np.testing.assert_array_equal(server[pushes], clients[pushes, 0])
    np.testing.assert_array_equal(received[~pushes], 0.0)

  def test_the_velocity_outlives_a_fetch(self):
    # Two clients: a fetch replaces a client's parameters with the server's and leaves its
    # momentum as it was, so the gradients it took before the fetch go on moving it after it
    # (delayed feedback, for about 1/(1 − β) steps).
    _, clients, velocity, _ = quadratic_clients(clients=2, n_sync=4, learning_rate=0.1,
                                                momentum=0.9, steps=8)
    fetched = 3  # client 0 (offset 0) pushes and fetches after update 4.
    self.assertGreater(abs(velocity[fetched, 0]), 1.0)  # ~ the sum of 4 decaying gradients.
    # Its next update starts from the velocity it had before the fetch: v' = β·v + θ.
    np.testing.assert_allclose(velocity[fetched + 1, 0],
                               0.9 * velocity[fetched, 0] + clients[fetched, 0], rtol=1e-6)

  def test_staleness_limits_the_effective_step_whatever_the_momentum(self):
    # At equal effective step η/(1 − β) (how far a constant gradient moves θ), momentum 0 and
    # 0.9 behave alike under staleness: 4 clients summed, n_sync 4 — both converge at 0.05 and
    # both diverge at 0.2 — where synchronously (n_sync 1) both converge at 0.4. Compared at one
    # η instead, momentum 0.9 takes 10× the step (the study's first draft compared so). From
    # θ = 1: converged below 1e-3, diverged above 1e3.
    for beta in (0.0, 0.9):
      at = lambda n_sync, step, beta=beta: quadratic_server(
          clients=4, n_sync=n_sync, momentum=beta, learning_rate=step * (1 - beta), steps=400)
      self.assertLess(at(4, 0.05), 1e-3, beta)
      self.assertGreater(at(4, 0.2), 1e3, beta)
      self.assertLess(at(1, 0.4), 1e-3, beta)

  def test_at_an_equal_server_step_a_stale_sum_is_less_stable_than_a_stale_mean(self):
    # The server's effective step 0.6 either way: averaged, each of 4 clients at η/(1 − β) 0.6;
    # summed, each at 0.15. Synchronously (n_sync 1) the two are one update. At n_sync 4 the mean
    # converges and the sum diverges: an averaged client's own steps at the full rate pull it
    # towards its own minimum (its change is bounded by how far away that is), a summed client's
    # small steps do not, and the server adds them whole (docs/asynchronous.md's summing part):
    # here the sum's stability limit is about half the mean's.
    # From θ = 1 after 600 steps: converged below 1e-2, diverged above 1e2.
    at = lambda n_sync, rule: quadratic_clients(
        clients=4, n_sync=n_sync, momentum=0.9, steps=600, rule=rule,
        learning_rate=(0.6 if rule == "average" else 0.15) * (1 - 0.9))[0]
    # The two round η·v differently in float32 (|θ| ≤ 1, about 6e-8 a step, damped by the
    # contraction): 1e-6 of the start bounds 600 steps' drift (2e-11 seen).
    np.testing.assert_allclose(at(1, "sum"), at(1, "average"), rtol=0, atol=1e-6)
    self.assertLess(abs(at(4, "average")[-1]), 1e-2)
    self.assertGreater(abs(at(4, "sum")[-1]), 1e2)


class AsgdTest(absltest.TestCase):

  def test_one_client_is_single_device_sgd(self):
    config = CONFIG.copy_and_resolve_references()
    config.update(n_push=2, n_fetch=2)
    _, _, got = testing.train_steps(
        testing.build("alexnet_tiny", "asgd", 1, 1, config, GLOBAL_BATCH), BATCHES)
    numerics.assert_as_accurate(got["params"], *single_device(config))  # after two pushes.

  def test_sync_every_step_without_stagger_is_synchronous_sgd_under_either_rule(self):
    # Each client's update is −lr·(its mean gradient). Averaged, the server's update is data
    # parallelism's on the global mean gradient at the same rate; summed, at 4× the rate (no
    # weight decay: summed, the decay term would be counted once per client).
    for rule, factor in (("average", 1), ("sum", 4)):
      config = CONFIG.copy_and_resolve_references()
      config.update(n_push=1, n_fetch=1, asgd_stagger=False, weight_decay=0.0,
                    asgd_server_rule=rule)
      _, _, got = testing.train_steps(
          testing.build("alexnet_tiny", "asgd", 4, 1, config, GLOBAL_BATCH), BATCHES)
      config.base_learning_rate *= factor  # data parallelism: one device's SGD (step_test).
      numerics.assert_as_accurate(got["params"], *single_device(config))

  def test_staggered_pushes_reach_the_server_on_different_steps(self):
    changed = {}
    for stagger in (False, True):
      config = CONFIG.copy_and_resolve_references()
      config.update(n_push=4, n_fetch=4, asgd_stagger=stagger)
      run = testing.build("alexnet_tiny", "asgd", 4, 1, config, GLOBAL_BATCH)
      state = run.scheme.state
      before, changed[stagger] = server(state), []
      for batch in BATCHES:
        state, _, _ = testing.train_steps(run, [batch], state)
        after = server(state)
        changed[stagger].append(not np.array_equal(after["fc8"]["bias"], before["fc8"]["bias"]))
        before = after
    self.assertEqual(changed[False], [False, False, False, True])  # all push after step 4
    self.assertEqual(changed[True], [True, True, True, True])  # one client pushes each step

  def test_staggered_pushes_equal_an_explicit_simulation(self):
    # Four independent single-device optax clients, pushing and fetching by the docstring's rules.
    replicas, n_sync = 4, 4
    config = CONFIG.copy_and_resolve_references()
    config.update(n_push=n_sync, n_fetch=n_sync, asgd_stagger=True, dropout_rate=0.0,
                  asgd_server_rule="sum")
    run = testing.build("alexnet_tiny", "asgd", replicas, 1, config, GLOBAL_BATCH)
    batches = testing.random_batches(9, GLOBAL_BATCH, seed=3)
    state, _, _ = testing.train_steps(run, batches)

    simulated = {dtype: simulate(run.tx, batches, dtype, replicas=replicas, n_sync=n_sync)
                 for dtype in ("float32", "float64")}
    numerics.assert_as_accurate(server(state), simulated["float32"], simulated["float64"])

  def test_warm_start_trains_one_client_and_shares_it(self):
    config = CONFIG.copy_and_resolve_references()
    config.update(n_push=3, n_fetch=3, warm_start_steps=2)
    run = testing.build("alexnet_tiny", "asgd", 4, 1, config, GLOBAL_BATCH)
    state, _, _ = testing.train_steps(run, BATCHES[:2])
    clients = np.asarray(state.local.params["fc6"]["dense"]["kernel"])
    np.testing.assert_array_equal(clients[1:], np.broadcast_to(clients[0], clients[1:].shape))
    np.testing.assert_array_equal(server(state)["fc6"]["dense"]["kernel"], clients[0])
    # Asynchronous from here. Offsets ⌊i·3/4⌋ = 0, 0, 1, 2: after step 3 clients 0 and 1 fetch
    # the server, client 3 keeps its own local update.
    state, _, _ = testing.train_steps(run, BATCHES[2:3], state)
    clients = np.asarray(state.local.params["fc6"]["dense"]["kernel"])
    np.testing.assert_array_equal(clients[0], clients[1])
    self.assertGreater(np.abs(clients[0] - clients[3]).max(), 1e-5)

  def test_after_a_warm_start_the_clients_go_on_with_client_0s_momentum_or_from_zero(self):
    for handed in (True, False):
      config = CONFIG.copy_and_resolve_references()
      config.update(n_push=3, n_fetch=3, warm_start_steps=2, asgd_warm_start_momentum=handed)
      run = testing.build("alexnet_tiny", "asgd", 4, 1, config, GLOBAL_BATCH)
      state, _, _ = testing.train_steps(run, BATCHES[:2])
      # The momentum buffers (the optimiser state's floating leaves), every client's.
      buffers = [np.asarray(x) for x in jax.tree.leaves(state.local.opt_state)
                 if jnp.issubdtype(x.dtype, jnp.floating)]
      self.assertNotEmpty(buffers)
      for buffer in buffers:
        if handed:  # each client holds client 0's, which two updates made non-zero.
          np.testing.assert_array_equal(buffer[1:], np.broadcast_to(buffer[0], buffer[1:].shape))
        else:
          np.testing.assert_array_equal(buffer, 0.0)
      self.assertEqual(any(np.abs(b).max() > 0 for b in buffers), handed)


def lockstep_sync(settings: asgd.Settings, replicas: int) -> core.Sync:
  """The lock-step rule as asgd.py ran it before clients had speeds of their own: every client
  one update per program step, pushing after update t when (t + o_i) mod n_push = 0 and fetching
  when (t + o_i) mod n_fetch = 0 — the reference equal step times must reproduce."""
  n_push, n_fetch = settings.n_push, settings.n_fetch
  share = 1.0 / replicas if settings.asgd_server_rule == "average" else 1.0

  def apply(local, client, shared, previous, step):
    i = core.replica_index()
    offset = (i * n_push) // replicas if settings.asgd_stagger else 0
    pending = jax.tree.map(lambda p, new, old: p + (new - old), client["pending"], local.params,
                           previous.params)

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
      return first, {"pending": jax.tree.map(jnp.zeros_like, pending)}, {"server": first.params}

    return jax.lax.cond(step <= settings.warm_start_steps, warm_start, asynchronous, None)

  return core.Sync(apply=apply, eval_params=asgd.eval_params, client_init=asgd.client_init,
                   shared_init=asgd.shared_init)


def settings(**fields) -> asgd.Settings:
  return asgd.Settings(**{"n_push": 4, "n_fetch": 4, "asgd_stagger": True,
                          "warm_start_steps": 0, "asgd_warm_start_momentum": True,
                          "asgd_server_rule": "average", "asgd_step_times": "equal", **fields})


class StepTimesTest(absltest.TestCase):
  """Clients at their own speeds (asgd.py's docstring): rounds of events in time order."""

  def test_equal_step_times_are_the_lock_step_schedule(self):
    # The same config through the rounds of equal step times and through the lock-step rule
    # above, after a warm start of 2 steps and 9 staggered steps at n_push 4, n_fetch 3 with
    # dropout on (offsets that put two clients on one phase). The schedule is the same exactly:
    # every client in every round, pushing and fetching on the lock-step rule's steps.
    config = CONFIG.copy_and_resolve_references()
    config.update(n_push=4, n_fetch=3, warm_start_steps=2, asgd_step_times="equal")
    events = asgd.timeline(settings(n_push=4, n_fetch=3, warm_start_steps=2), 4, seed=7,
                           rounds=9)
    t = np.arange(3, 12)[:, None]  # the program steps after the warm start.
    offsets = (np.arange(4) * 4) // 4
    self.assertTrue(events["active"].all())
    np.testing.assert_array_equal(events["push"], (t + offsets) % 4 == 0)
    np.testing.assert_array_equal(events["fetch"], (t + offsets) % 3 == 0)
    # And so is the training, to float32's accuracy: every client's parameters and momentum and
    # the server within the numerics yardstick of the lock-step rule run in float64 (as close
    # as the lock-step rule's own float32 run is, tests/numerics.py). Not bit for bit: the two
    # programs differ (the rounds' clock is compiled in), and XLA:CPU may then compile the same
    # gradient differently by an ulp (seen on JAX 0.10.2; JAX 0.12 gave equal bits).
    batches = testing.random_batches(11, GLOBAL_BATCH, seed=5)
    state = lambda run, s: jax.tree.map(np.asarray, (s.local, s.shared["server"]))
    got = {}
    for name, make, dtype in (("rounds", asgd.make_sync, "float32"),
                              ("lock-step", lockstep_sync, "float32"),
                              ("exact", lockstep_sync, "float64")):
      run_config = config.copy_and_resolve_references()
      run_config.dtype = dtype
      with mock.patch.object(experiment, "_sync",
                             lambda spec, make=make: make(spec.local_sgd, spec.plan.data)):
        with jax.enable_x64(dtype == "float64"):
          run = testing.build("alexnet_tiny", "asgd", 4, 1, run_config, GLOBAL_BATCH)
          final, _, _ = testing.train_steps(run, batches)
          got[name] = state(run, final)
    numerics.assert_as_accurate(got["rounds"], got["lock-step"], got["exact"])

  def test_equal_step_times_make_every_client_step_every_round(self):
    events = asgd.timeline(settings(n_push=16, n_fetch=16), 8, seed=3, rounds=48)
    self.assertTrue(events["active"].all())
    np.testing.assert_array_equal(events["time"], np.arange(1, 49))
    # Offsets 2i: one client meets the server every 2 steps, each push 7 other pushes stale.
    np.testing.assert_array_equal(events["push"].sum(axis=1), np.arange(1, 49) % 2 == 0)
    self.assertTrue((events["staleness"][events["push"]][8:] == 7).all())

  def test_a_straggler_steps_and_pushes_a_quarter_as_often(self):
    events = asgd.timeline(settings(asgd_step_times="straggler", asgd_stagger=False), 4, seed=0,
                           rounds=64)
    time = events["time"]
    self.assertEqual(asgd.rounds_for(settings(asgd_step_times="straggler", asgd_stagger=False),
                                     4, seed=0, time=64.0), 64)
    np.testing.assert_array_equal(time, np.arange(1, 65))  # the fast clients set the rounds.
    np.testing.assert_array_equal(events["active"].sum(axis=0), [64, 64, 64, 16])
    np.testing.assert_array_equal(events["push"].sum(axis=0), [16, 16, 16, 4])
    # The straggler pushes at times 16, 32, 48 and 64, each after the three others pushed at
    # the three instants since it last fetched (or began): 9 pushes stale; the three meet the
    # server together every 4 steps and see each other's pushes at once: never stale.
    pushed = events["push"]
    np.testing.assert_array_equal(events["staleness"][:, 3][pushed[:, 3]], [9, 9, 9, 9])
    np.testing.assert_array_equal(events["staleness"][:, :3][pushed[:, :3]], 0)

  def test_heavy_tailed_rounds_are_in_time_order_and_meet_at_one_instant(self):
    rule = settings(asgd_step_times="heavy_tailed", n_push=2, n_fetch=2)
    events = asgd.timeline(rule, 8, seed=1, rounds=300)
    self.assertTrue((np.diff(events["time"]) >= 0).all())
    # Replayed one event at a time: each client's completions, from its own draws, in time order.
    durations = np.asarray(jax.vmap(lambda k: asgd.step_durations(
        "heavy_tailed", seed=1, clients=jnp.arange(8), step=k))(jnp.arange(1, 300)))
    # The k-th step ends at the sum of steps 1…k's durations, in float32 as the clock sums them.
    ends = {c: np.cumsum(durations[:, c], dtype=np.float32) for c in range(8)}
    steps = events["active"].sum(axis=0)
    self.assertGreater(steps.max(), steps.min() + 5)  # unequal speeds: unequal contributions.
    # A round's meetings all share one instant: at most one distinct push time per round.
    for r in range(300):
      meeting = events["active"][r] & (events["push"][r] | events["fetch"][r])
      times = {float(ends[c][int(events["active"][:r, c].sum())])
               for c in np.flatnonzero(meeting)}
      self.assertLessEqual(len(times), 1, r)
    # Staleness varies push to push.
    self.assertGreater(len(set(events["staleness"][events["push"]].tolist())), 3)

  def test_a_client_outside_its_round_keeps_its_parameters_and_momentum(self):
    config = CONFIG.copy_and_resolve_references()
    config.update(n_push=4, n_fetch=4, asgd_step_times="straggler", asgd_stagger=False)
    run = testing.build("alexnet_tiny", "asgd", 4, 1, config, GLOBAL_BATCH)
    start = jax.tree.map(np.array, run.scheme.state.local)  # a copy: the step donates its input.
    state, _, _ = testing.train_steps(run, BATCHES[:3])
    after = jax.tree.map(np.asarray, state.local)
    for before, now in zip(jax.tree.leaves(start), jax.tree.leaves(after)):
      np.testing.assert_array_equal(now[3], before[3])  # the straggler's first step ends at 4.
    kernel = lambda tree: tree.params["fc6"]["dense"]["kernel"]
    self.assertGreater(np.abs(kernel(after)[0] - kernel(start)[0]).max(), 1e-6)


  def test_random_phases_are_drawn_from_the_seed_and_keep_the_lock_step_rule(self):
    # Lock-step clients whose phases are drawn (asgd_phases "random"): every client in every
    # round, each pushing and fetching on the lock-step rule's steps at its own drawn offset,
    # each push as stale as the pushes since its client's fetch; even phases spread 8 clients
    # two to a phase of n_push 4.
    rule = settings(asgd_phases="random")
    phases = np.asarray(asgd.offsets(rule, 8, seed=3))
    self.assertTrue(((phases >= 0) & (phases < 4)).all())
    self.assertFalse((phases == np.asarray(asgd.offsets(rule, 8, seed=4))).all())
    np.testing.assert_array_equal(asgd.offsets(settings(), 8, seed=3), [0, 0, 1, 1, 2, 2, 3, 3])
    events = asgd.timeline(rule, 8, seed=3, rounds=40)
    t = np.arange(1, 41)[:, None]
    self.assertTrue(events["active"].all())
    np.testing.assert_array_equal(events["push"], (t + phases) % 4 == 0)
    np.testing.assert_array_equal(events["fetch"], (t + phases) % 4 == 0)
    # After the first period a push is stale by the other clients' pushes in the 3 rounds
    # since its client's last fetch (its own round's pushes at the same instant not counted).
    pushes_per_round = events["push"].sum(axis=1)
    for r, c in zip(*np.nonzero(events["push"][4:])):
      self.assertEqual(events["staleness"][r + 4, c], pushes_per_round[r + 1:r + 4].sum())
    with self.assertRaisesRegex(UserError, "asgd_phases 'random' draws each staggered"):
      asgd.check(settings(asgd_phases="random", asgd_stagger=False), 8)

  def test_the_heavy_tail_s_sigma_sets_how_far_step_times_spread(self):
    # Lognormal step times of mean 1 and log-sd σ: over 8 clients × 4,000 steps the log-sd is σ
    # within 3% (its sampling sd is σ/√(2n), 0.4% of σ) and the mean 1 within 0.05 (five
    # sampling sds at σ = 1: √(e − 1)/√32,000 = 0.0073).
    for sigma in (0.1, 0.3, 1.0):
      durations = np.asarray(jax.vmap(lambda k: asgd.step_durations(
          "heavy_tailed", seed=2, clients=jnp.arange(8), step=k, heavy_tail_sigma=sigma))(
              jnp.arange(1, 4001)))
      self.assertAlmostEqual(np.log(durations).std() / sigma, 1.0, delta=0.03)
      self.assertAlmostEqual(durations.mean(), 1.0, delta=0.05)
    # The clients' rounds follow the σ the settings name.
    spread = lambda sigma: asgd.timeline(settings(asgd_step_times="heavy_tailed",
                                                  asgd_heavy_tail_sigma=sigma), 8, seed=2,
                                         rounds=400)["staleness"]
    self.assertLess(spread(0.1).std(), spread(1.0).std())

  def test_lock_step_clients_fed_a_drawn_run_s_images(self):
    # asgd_data_order "heavy_tailed": each lock-step client's k-th step takes the rows its k-th
    # step took in a heavy-tailed run of the same seed (the round it ran in), after a warm start
    # fed as its own; "own" is each program step's.
    rule = settings(asgd_data_order="heavy_tailed", warm_start_steps=3)
    steps = asgd.data_steps(rule, 8, seed=1, steps=60)
    drawn = asgd.timeline(settings(asgd_step_times="heavy_tailed", warm_start_steps=3), 8,
                          seed=1, rounds=400)["active"]
    np.testing.assert_array_equal(steps[:3], np.broadcast_to(np.arange(3)[:, None], (3, 8)))
    for c in range(8):
      np.testing.assert_array_equal(steps[3:, c], 3 + np.flatnonzero(drawn[:, c])[:57])
    self.assertGreater((steps[3:] != np.arange(3, 60)[:, None]).mean(), 0.5)
    np.testing.assert_array_equal(asgd.data_steps(settings(), 8, seed=1, steps=5),
                                  np.broadcast_to(np.arange(5)[:, None], (5, 8)))
    # The run's source feeds them: each client's 16 rows of the batch of its own step.
    config = CONFIG.copy_and_resolve_references()
    config.update(dataset="digits", parallelism="asgd", global_batch_size=128,
                  mesh=dict(data=8, model=1), n_push=4, n_fetch=4, num_train_steps=60,
                  warm_start_steps=3, asgd_data_order="heavy_tailed", seed=1)
    spec = experiment.resolve(config)
    source = experiment.load_dataset(spec)
    np.testing.assert_array_equal(source.block_steps, steps)
    rows = next(source.train_batches(128, seed=1, position=10, shard=slice(None)))[0]
    for c in range(8):
      np.testing.assert_array_equal(
          rows[16 * c:16 * (c + 1)],
          arrays.train_indices(source, 128, seed=1, step=int(steps[10, c]))[16 * c:16 * (c + 1)])

  def test_a_drawn_data_order_is_refused_where_it_means_nothing(self):
    config = lambda **fields: testing.tiny_config(**{
        "parallelism": "asgd", "mesh": dict(data=4, model=1), "global_batch_size": 16,
        "asgd_data_order": "heavy_tailed", **fields})
    with self.assertRaisesRegex(UserError, "asgd_data_order 'heavy_tailed' feeds lock-step "
                                           "clients .* asgd_step_times is 'straggler'"):
      experiment.resolve(config(asgd_step_times="straggler"))
    with self.assertRaisesRegex(UserError, "asgd_data_order 'heavy_tailed' needs a dataset held "
                                           "in memory .* got dataset 'imagenette/320px-v2'"):
      experiment.resolve(config(dataset="imagenette/320px-v2"))


if __name__ == "__main__":
  absltest.main()
