"""Timing a config's training step: compile it on synthetic data, time calls, the FLOP/s peak.

Shared by the benchmarks that time steps (no flags here, so any of them can import it).
"""

import functools
import time

import jax
import numpy as np

import experiment
import input_pipeline
from hybrid_parallel import models
from hybrid_parallel.analysis import costmodel

# Stated dense peaks (FLOP/s) by device kind and compute dtype (NVIDIA's H100 SXM datasheet; the
# H200 has the H100 SXM's arithmetic). float32 is charged at the TF32 tensor-core peak: XLA's
# default precision on NVIDIA GPUs lets cuDNN and cuBLAS run float32 convolutions and matmuls in
# TF32 (plain float32 arithmetic peaks at 67 TFLOP/s).
GPU_PEAKS = {"H100": {"float32": 495e12, "bfloat16": 989e12},
             "H200": {"float32": 495e12, "bfloat16": 989e12}}
PEAK_NAMES = {"float32": "TF32", "bfloat16": "bfloat16"}
# The side of the square matmuls whose rate is a CPU's peak for MFU (a real run's).
CPU_GEMM_N = 2048


def cpu_gemm_flops(n: int = CPU_GEMM_N, repeats: int = 10) -> float:
  """Measured float32 matmul rate of this machine: the best of `repeats` (a peak; on a shared
  machine anything else running only slows a repeat down)."""
  a = jax.device_put(np.random.default_rng(0).standard_normal((n, n), np.float32))
  matmul = jax.jit(lambda x: x @ x)
  matmul(a).block_until_ready()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    matmul(a).block_until_ready()
    times.append(time.perf_counter() - start)
  return 2 * n**3 / min(times)


@functools.cache
def this_cpu_flops(n: int = CPU_GEMM_N) -> float:
  """cpu_gemm_flops of n² matrices, measured once per process."""
  return cpu_gemm_flops(n)


def peak(devices, dtype: str, cpu_flops: float | None) -> tuple[float | None, str]:
  """The FLOP/s an MFU is measured against, and where the figure comes from."""
  kind = devices[0].device_kind
  for name, peaks in GPU_PEAKS.items():
    if name in kind:
      return (peaks[dtype] * len(devices),
              f"stated {name} dense {PEAK_NAMES[dtype]} peak × {len(devices)}")
  if devices[0].platform == "cpu":
    return cpu_flops, "measured float32 GEMM rate of this CPU (best 2048² matmul, all cores)"
  return None, f"no stated peak for {kind!r} (add it to step_timing.GPU_PEAKS)"


def compile_step(config, num_classes: int, *, compiler_options: dict | None = None):
  """The config's train step compiled on synthetic data, as a no-argument callable.

  `compiler_options` are added to the step's own (compiler_options.py) for this compile.

  Returns (step, compile_s, compiled, plan, devices): each `step()` runs one training step on the
  same synthetic batch and waits for it (`step(wait=False)` only dispatches it); the state is
  carried from call to call.
  """
  batch = config.global_batch_size
  start = time.perf_counter()
  program = experiment.lower_train_step(experiment.resolve(config), num_classes=num_classes)
  compiled = program.lowered.compile(compiler_options or None)
  compile_s = time.perf_counter() - start
  run = program.run
  plan, mesh, scheme, sharding = run.plan, run.mesh, run.scheme, run.batch_sharding
  devices = list(mesh.devices.flat)
  size = config.image_size
  # This process's rows only (all of them in one process; a mocked multi-host topology sees one
  # host's share), assembled into the global batch as the input pipeline does.
  rows = input_pipeline.process_rows(sharding, batch)
  rng = np.random.default_rng(0)
  images = rng.standard_normal((batch, size, size, 3), np.float32)[rows]
  labels = rng.integers(0, num_classes, batch).astype(np.int32)[rows]
  images, labels = input_pipeline.to_global(sharding, images, labels, global_batch=batch)
  state = scheme.init()

  def step(*, wait: bool = True):
    nonlocal state
    with jax.set_mesh(mesh):
      state, metrics = compiled(state, images, labels)
      if wait:
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


def pipelined_seconds(step, steps: int, *, repeats: int = 3) -> float:
  """Seconds per step of `steps` steps of `compile_step`'s `step` dispatched back to back and
  waited for once, the median of `repeats` such runs: what a training loop that keeps steps in
  flight can reach. (Each of time_steps' steps also holds a round trip between the host and the
  device: on an H200 about 1 ms of 6.7 while tracing, docs/gpu.md.)"""
  def run():
    start = time.perf_counter()
    for _ in range(steps - 1):
      step(wait=False)
    step()  # each step takes the state of the one before: the last done, all are.
    return (time.perf_counter() - start) / steps

  return float(np.median([run() for _ in range(repeats)]))


def median_ms(run, repeats: int) -> float:
  """Median milliseconds of `repeats` calls of `run` (which waits for its result), after one
  untimed call (the compile)."""
  run()
  return 1e3 * float(np.median(time_steps(run, repeats)))


# How `measure` rounds each rate, written into every row (`rounding`) so that a reader — and
# tests/accelerator_test.py's tolerances — knows the interval each figure stands for. MFU to
# significant figures: a CPU's is ~0.002, of which four decimals kept one or two figures.
ROUNDING = {"images_per_sec": {"decimals": 1}, "step_ms": {"decimals": 2},
            "mfu": {"significant": 4}}


def rounded(value: float, *, decimals: int | None = None, significant: int | None = None) -> float:
  """`value` to `decimals` places, or to `significant` figures."""
  return round(value, decimals) if decimals is not None else float(f"{value:.{significant}g}")


def measure(config, *, num_classes: int, steps: int, warmup: int,
            compiler_options: dict | None = None, pipelined: bool = False,
            cpu_gemm_n: int | None = None) -> dict:
  """The harness every step-timing benchmark shares: compiles the config's train step on
  synthetic data, times `steps` calls after `warmup`, and reports images/s of the median step,
  compile seconds, the program's memory (XLA's analysis), the device's peak so far and MFU;
  `pipelined` adds the same of `pipelined_seconds` (`*_pipelined`). On a CPU the peak is
  this_cpu_flops of `cpu_gemm_n`² matrices (default CPU_GEMM_N; a dry run's 1024² is an
  eighth of the arithmetic, and its MFU a code path, not a figure)."""
  step, compile_s, compiled, _, devices = compile_step(config, num_classes,
                                                       compiler_options=compiler_options)
  time_steps(step, warmup)
  seconds = float(np.median(time_steps(step, steps)))
  batch = config.global_batch_size
  flops = costmodel.training_flops_per_image(models.ARCHITECTURES[config.model],
                                             config.image_size, num_classes)
  peak_flops, peak_source = peak(devices, config.dtype,
                                 this_cpu_flops(cpu_gemm_n or CPU_GEMM_N)
                                 if devices[0].platform == "cpu" else None)
  memory = compiled.memory_analysis()
  stats = devices[0].memory_stats() or {}

  def rates(seconds: float, suffix: str = "") -> dict:
    figures = {"images_per_sec": batch / seconds, "step_ms": 1e3 * seconds,
               "mfu": flops * batch / seconds / peak_flops if peak_flops else None}
    return {f"{name}{suffix}": None if value is None else rounded(value, **ROUNDING[name])
            for name, value in figures.items()}

  row = {"model": config.model, "dtype": config.dtype, "batch": batch, **rates(seconds),
         "compile_s": round(compile_s, 1),
         "program_gib": round((memory.temp_size_in_bytes + memory.argument_size_in_bytes +
                               memory.output_size_in_bytes - memory.alias_size_in_bytes)
                              / 2**30, 3) if memory else None,
         "device_peak_gib": (round(stats["peak_bytes_in_use"] / 2**30, 3)
                             if "peak_bytes_in_use" in stats else None),
         "peak_flops": peak_flops, "peak_source": peak_source, "flops_per_image": flops,
         "rounding": ROUNDING}
  if pipelined:
    row.update(rates(pipelined_seconds(step, steps), "_pipelined"))
  return row
