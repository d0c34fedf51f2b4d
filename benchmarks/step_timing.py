"""Timing a config's training step: compile it on synthetic data, time calls, the FLOP/s peak.

Shared by throughput.py and pytorch_reference.py (no flags here, so both can import it).
"""

import time

# Stated dense peaks (FLOP/s) by device kind and dtype (REFERENCES.md; H200 = H100 compute).
GPU_PEAKS = {"H100": {"float32": 67e12, "bfloat16": 989e12},
             "H200": {"float32": 67e12, "bfloat16": 989e12}}


def cpu_gemm_flops(n: int = 2048, repeats: int = 10) -> float:
  """Measured float32 matmul rate of this machine: the best of `repeats` (a peak; on a shared
  machine anything else running only slows a repeat down)."""
  import jax
  import numpy as np
  a = jax.device_put(np.random.default_rng(0).standard_normal((n, n), np.float32))
  matmul = jax.jit(lambda x: x @ x)
  matmul(a).block_until_ready()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    matmul(a).block_until_ready()
    times.append(time.perf_counter() - start)
  return 2 * n**3 / min(times)


def peak(devices, dtype: str, cpu_flops: float | None) -> tuple[float, str]:
  kind = devices[0].device_kind
  for name, peaks in GPU_PEAKS.items():
    if name in kind:
      return peaks[dtype] * len(devices), f"stated {name} {dtype} dense peak × {len(devices)}"
  return cpu_flops, "measured float32 GEMM rate of this CPU (best 2048² matmul, all cores)"


def compile_step(config, num_classes: int):
  """The config's train step compiled on synthetic data, as a no-argument callable.

  Returns (step, compile_s, compiled, plan, devices): each `step()` runs one training step on the
  same synthetic batch and waits for it; the state is carried from call to call.
  """
  import jax
  import numpy as np
  from jax.sharding import NamedSharding
  from hybrid_parallel import optim, partitioning, schemes

  plan = partitioning.plan(config.parallelism, config.mesh.data, config.mesh.model)
  batch = config.global_batch_size
  partitioning.check_batch(plan, batch, microbatches=config.microbatches)
  devices = jax.devices()[:plan.data * plan.model]
  mesh = schemes.make_mesh(config, plan, devices)
  schedule = optim.learning_rate_schedule(config, batch, 100, 1000)
  _, _, scheme = schemes.setup(config, plan, mesh, num_classes, 3, schedule)
  sharding = NamedSharding(mesh, plan.batch_spec)
  rng = np.random.default_rng(0)
  size = config.image_size
  images = jax.device_put(rng.standard_normal((batch, size, size, 3), np.float32), sharding)
  labels = jax.device_put(rng.integers(0, num_classes, batch).astype(np.int32), sharding)
  with jax.set_mesh(mesh):
    start = time.perf_counter()
    compiled = scheme.train_step.lower(scheme.state, images, labels).compile()
    compile_s = time.perf_counter() - start
  state = scheme.state

  def step():
    nonlocal state
    with jax.set_mesh(mesh):
      state, metrics = compiled(state, images, labels)
      jax.block_until_ready(metrics)

  return step, compile_s, compiled, plan, devices


def time_steps(step, steps: int) -> list[float]:
  """Seconds taken by each of `steps` calls of `step`."""
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
  return times
