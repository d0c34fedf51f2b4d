"""Shared test setup: 8 simulated CPU devices, tiny configs, and a few-step training helper.

Importing this module sets the CPU device count, so every test module imports it before anything
queries the devices.
"""

import jax

jax.config.update("jax_num_cpu_devices", 8)

import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402

from configs import default  # noqa: E402
from hybrid_parallel import optim, partitioning, schemes, step  # noqa: E402

IMAGE_SIZE = 64  # The smallest input the AlexNet stem and pools leave a feature map for.


def tiny_config(**overrides):
  """The default config on `alexnet_tiny`, with `overrides` applied."""
  config = default.get_config()
  config.model = "alexnet_tiny"
  config.image_size = IMAGE_SIZE
  config.update(overrides)
  return config


def random_batches(n: int, batch: int, channels: int = 3, classes: int = 10, seed: int = 0):
  """`n` (images, labels) pairs of normal noise and random labels."""
  rng = np.random.RandomState(seed)
  return [(rng.randn(batch, IMAGE_SIZE, IMAGE_SIZE, channels).astype(np.float32),
           rng.randint(0, classes, batch).astype(np.int32)) for _ in range(n)]


def build(model_name: str, scheme: str, data: int, model: int, config, batch: int):
  """Mesh, plan, model, optimiser, initial state and steps for one scheme (as train.py does)."""
  config = config.copy_and_resolve_references()
  config.model, config.parallelism = model_name, scheme
  plan = partitioning.plan(scheme, data, model)
  mesh = schemes.make_mesh(config, plan)
  net, tx, built = schemes.setup(config, plan, mesh, 10, 3,
                                 optim.learning_rate_schedule(config, batch, 10, 100))
  return dict(plan=plan, mesh=mesh, model=net, tx=tx, state=built.state, scheme=built,
              sharding=NamedSharding(mesh, plan.batch_spec), train_step=built.train_step,
              eval_step=step.make_eval_step(net, plan, mesh, built.eval_specs))


def put(setup, *arrays):
  return tuple(jax.device_put(a, setup["sharding"]) for a in arrays)


def train_steps(setup, batches):
  """Runs one step per batch; returns the per-step losses and the evaluated variables (numpy)."""
  state, losses = setup["state"], []
  for images, labels in batches:
    state, metrics = setup["train_step"](state, *put(setup, images, labels))
    losses.append(float(metrics["train_loss"]))
  setup["state"] = state
  return np.array(losses), jax.tree.map(np.asarray, setup["scheme"].eval_variables(state))
