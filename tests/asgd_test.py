"""A-SGD: one client is single-device SGD; n_sync = 1 without stagger is summed synchronous SGD."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P
from absl.testing import absltest

from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel import models, train_state
from hybrid_parallel.local_sgd import asgd, core
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
  pushed and fetched by asgd.py's docstring's rules, staggered."""
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


def quadratic_server(*, clients: int, n_sync: int, learning_rate: float, momentum: float,
                     steps: int = 200) -> float:
  """|θ_ps| after `steps` of A-SGD (asgd.py's own push / fetch, staggered) on ½θ², every client
  at `learning_rate` with `momentum` (optax), from θ = 1: the noiseless worst case of staleness,
  every client's gradient the same. Synchronous SGD on the sum of the clients' updates (n_sync 1)
  is stable for clients · rate < 2 (1 + momentum)."""
  sync = asgd.make_sync(asgd.Settings(n_push=n_sync, n_fetch=n_sync, asgd_stagger=True,
                                      warm_start_steps=0), clients)
  tx = optax.sgd(learning_rate, momentum=momentum or None)

  def client():
    params = {"theta": jnp.ones(())}
    carry = (core.Replica(params, tx.init(params)), asgd.client_init(params),
             asgd.shared_init(params))

    def step(t, carry):
      local, pending, shared = carry
      updates, opt_state = tx.update(local.params, local.opt_state)  # ∇½θ² = θ.
      updated = core.Replica(optax.apply_updates(local.params, updates), opt_state)
      return sync.apply(updated, pending, shared, local.params, t + 1)

    return jnp.abs(jax.lax.fori_loop(0, steps, step, carry)[2]["server"]["theta"])

  mesh = mesh_lib.make_mesh(clients, 1)
  run = jax.jit(jax.shard_map(client, mesh=mesh, in_specs=(), out_specs=P(), check_vma=False))
  return float(run())


class StalenessTest(absltest.TestCase):
  """Why A-SGD at n_sync 4 collapses on digits where n_sync 1 learns (docs/asynchronous.md):
  each client keeps its momentum across fetches, so every push carries updates the server has
  already applied — momentum multiplies staleness. On ½θ² with 4 clients at a rate whose
  synchronous sum is well inside the stable range (4 · 0.1 = 0.4 < 3.8 at momentum 0.9):"""

  def test_momentum_under_staleness_diverges_where_synchronous_sgd_converges(self):
    # Converged: the synchronous sum contracts by ~0.95 a step (√0.9), 0.95^200 ≈ 4e-5.
    self.assertLess(quadratic_server(clients=4, n_sync=1, learning_rate=0.1, momentum=0.9), 1e-3)
    # Diverged: so far past its stable rate at n_sync 4 that a quarter of the rate (the
    # staleness-aware rate ÷ n_sync) diverges too.
    for rate in (0.1, 0.025):
      self.assertGreater(
          quadratic_server(clients=4, n_sync=4, learning_rate=rate, momentum=0.9), 1e3)

  def test_without_momentum_the_same_staleness_converges(self):
    # At momentum 0 nothing carries a stale update past a fetch: the same rate converges.
    self.assertLess(quadratic_server(clients=4, n_sync=4, learning_rate=0.1, momentum=0.0), 1e-3)


class AsgdTest(absltest.TestCase):

  def test_one_client_is_single_device_sgd(self):
    config = CONFIG.copy_and_resolve_references()
    config.update(n_push=2, n_fetch=2)
    _, _, got = testing.train_steps(
        testing.build("alexnet_tiny", "asgd", 1, 1, config, GLOBAL_BATCH), BATCHES)
    numerics.assert_as_accurate(got["params"], *single_device(config))  # after two pushes.

  def test_sync_every_step_without_stagger_sums_the_clients_updates(self):
    # Each client's update is −lr·(its mean gradient); the server adds all four, which is data
    # parallelism on the global mean gradient with 4× the learning rate (no weight decay: the
    # decay term would be counted once per client).
    config = CONFIG.copy_and_resolve_references()
    config.update(n_push=1, n_fetch=1, asgd_stagger=False, weight_decay=0.0)
    _, _, got = testing.train_steps(
        testing.build("alexnet_tiny", "asgd", 4, 1, config, GLOBAL_BATCH), BATCHES)
    config.base_learning_rate *= 4  # data parallelism: one device's SGD (step_test).
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
    config.update(n_push=n_sync, n_fetch=n_sync, asgd_stagger=True, dropout_rate=0.0)
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


if __name__ == "__main__":
  absltest.main()
