r"""Everything the project measures on an accelerator, in one process, as one JSON report.

  python -m benchmarks.speed.accelerator                   # on a GPU machine: the whole report
  python -m benchmarks.speed.accelerator --dry_run         # anywhere: tiny sizes, every code path
  python -m benchmarks.speed.accelerator --sections=pytorch,trainer \
      --previous=runs/a/accelerator.json
                                                     # a report made in several calls, merged

docs/gpu.md is what it measured on an H200 (docs/gpu.json: the merged report).

Writes accelerator.json and accelerator.md (the report's tables) to --out, printing the tables as
it goes. Sections, in order of importance; each records its seconds and, if it fails, the error
(the others still run), and one that would start past --budget_s is skipped and says so:

  environment     JAX / jaxlib / backend versions, the device, its stated peaks.
  single_device   the real train step (experiment.build, as train.py) of `alexnet` and
                  `alexnet_owt` at 224², 1000 classes, synthetic data, float32 and bfloat16,
                  batch 128 / 256 / 512: images/s from the median step, compile seconds, the
                  program's memory (XLA's memory analysis) and the device's peak so far, MFU;
                  and the same with the steps dispatched back to back (`*_pipelined`: each
                  timed step waits for its result, and so also holds a host round trip).
  pytorch         torchvision's AlexNet (= alexnet_owt) in PyTorch on the same device, in a
                  worker process: eager float32, eager channels_last, bfloat16 autocast +
                  channels_last, and the same under torch.compile; the same batches and
                  optimiser (SGD, momentum 0.9, weight decay 5e-4). Ours ÷ the best variant.
  profile         a jax.profiler trace of bfloat16 alexnet_owt at batch 512: the top operations
                  by device time, and when the device waited (benchmarks/common/trace_stats.py).
  tuning          the same step changed one thing at a time, each against the baseline in the
                  same run (timed again last, for the spread): the other max-pool and stem-conv
                  implementations (layers.MAX_POOLS, layers.STEM_CONVS), no dropout and another
                  PRNG for its bits (what the per-example dropout masks cost), and per-platform
                  compiler options.
  mock_multi_gpu  8-GPU programs on this one GPU (JAX's mocked GPU topology, below): data 8×1,
                  hybrid 4×2, owt 2×4 as Krizhevsky's (a) and (b) at paper sizes in bfloat16,
                  each in its own process: step time as one device sees it, bytes per device,
                  whether the gradient all-reduces overlap compute
                  (analysis/hlo_stats.async_collectives), and what the time model predicted.
  trainer         `python main.py` on synthetic 224² data in bfloat16 for 300 steps, the
                  `single` scheme at batch 256 and 512, against the bare step (waited for and
                  pipelined); 20 of its steps traced: the device's busy share and longest gaps.
  notebook        notebooks/colab.ipynb executed (needs nbclient and ipykernel): the platform
                  it chose, its config and the training cell's images/s.
  suite           the test suite under this machine's JAX on CPU devices (tests/__init__.py),
                  a pytest worker per core: passed, failed, skipped (each named, with why).

FLOPs and MFU: the model's FLOPs (analysis/costmodel.py: 1 multiply-add = 2 FLOPs, training =
3 × forward; 4.29 GFLOP per image for alexnet_owt at 224²) × images/s ÷ the stated dense peak
of the compute dtype (common/step_timing.py: H100/H200 989 TFLOP/s bfloat16; float32 at the
495 TFLOP/s TF32 peak, since XLA's default precision runs float32 convolutions and matmuls in
TF32 on these GPUs).

The mocked topology (`jax_mock_gpu_topology = "1x8x1"`: 8 hosts of one GPU, of which this
process is host 0, since a process can mock only as many GPUs per host as it has): the program is
compiled for 8 devices and this GPU runs device 0's share of the compute. Current XLA skips a
mocked collective at run time (no modelled sleep; openxla/xla PR #40443), so the measured step is
one device's compute alone; the predicted 8-GPU step adds the bytes the HLO sends per device
that the schedule does not overlap with compute, over NVLink and over a 400 Gb/s NIC (MACHINES).
Sharded autotuning is turned off in the workers (it waits for the other processes). Timings,
not numerics: nothing is exchanged and the results are garbage. On a CPU (--dry_run) the same
programs run on simulated CPU devices instead.

A machine without this project's dependencies (ml_collections, tensorboardX; nbclient and
ipykernel for the notebook) needs them first: `pip download` their wheels elsewhere and
`pip install --no-index` them there.
"""

import dataclasses
import datetime
import faulthandler
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import jax
import jaxlib
import numpy as np
from absl import app, flags

import benchmarks
import experiment
from benchmarks.common import main_runs, step_timing, torch_alexnet, trace_stats
from benchmarks.speed import accelerator_tables, gpu_topologies
from configs import default
from hybrid_parallel import layers, models, partitioning, platforms
from hybrid_parallel.analysis import costmodel, hardware, hlo_stats
from notebooks import runtime  # the one reader of the requirements files.

# JAX would take 75% of the GPU's memory at its first use, leaving the PyTorch worker too little;
# with this it takes what it uses (and the device's peak figure means something). Read when the
# GPU client starts (jaxlib's xla_client), not at `import jax`: set after the imports, it holds.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

ROOT = benchmarks.ROOT
SECTIONS = ("environment", "single_device", "pytorch", "profile", "tuning", "mock_multi_gpu",
            "trainer", "notebook", "suite")

_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Tiny sizes and few steps: checks that every "
                             "section runs, on any machine (the test suite runs it on the CPU).")
_OUT = flags.DEFINE_string("out", os.path.join(ROOT, "runs", "accelerator"),
                           "Where accelerator.json and accelerator.md go.")
_SECTIONS = benchmarks.define_choices("sections", SECTIONS, "Sections to run.")
_BUDGET = flags.DEFINE_float("budget_s", 480.0, "Skip a section that would start later than "
                             "this many seconds after the start.")
_PREVIOUS = flags.DEFINE_list("previous", [], "Reports (accelerator.json) of earlier runs whose "
                              "sections are kept unless this run re-runs them: a report made "
                              "in several calls of a time-limited machine, merged.")
_WORKER = flags.DEFINE_string("worker", None, "Internal: run one part in this process "
                              "(pytorch, or mock:<name>), appending its rows to --worker_rows.")
_WORKER_ROWS = flags.DEFINE_string("worker_rows", None, "Internal: the worker's JSON-lines "
                                   "file (rows written as they are measured).")


@dataclasses.dataclass(frozen=True)
class Sizes:
  """What one run measures: the paper's sizes, or tiny ones for --dry_run."""
  image_size: int
  classes: int
  models: tuple[str, ...]
  dtypes: tuple[str, ...]
  batches: tuple[int, ...]
  steps: int  # timed steps per measurement (the median is reported)
  warmup: int  # untimed steps after the compile
  mock_runs: dict  # name -> (model, parallelism, data, model ways, global batch, overrides)
  trainer_batches: tuple[int, ...]  # main.py against the bare step at each (target >= 0.9x).
  trainer_args: tuple[str, ...]  # main.py's other overrides.
  trainer_profile_steps: int  # main.py's steps traced (after its first), for when the GPU waited.
  # On a CPU, the MFU's peak: the rate of cpu_gemm_n² matmuls.
  cpu_gemm_n: int = step_timing.CPU_GEMM_N

  @property
  def goal(self) -> tuple[str, str, int]:
    """The configuration the project's speed targets are stated for: bfloat16 alexnet_owt at
    batch 512."""
    return self.models[-1], "bfloat16", self.batches[-1]


PAPER = Sizes(
    image_size=224, classes=1000, models=("alexnet", "alexnet_owt"),
    dtypes=("float32", "bfloat16"), batches=(128, 256, 512), steps=20, warmup=3,
    # data8 last: its compile once ran out its time limit (JAX 0.11.2, 2026-11-23).
    mock_runs={"hybrid8": ("alexnet", "hybrid", 4, 2, 512, {}),
               "owt8": ("alexnet_owt", "owt", 2, 4, 1024, {}),
               "owt8_b": ("alexnet_owt", "owt", 2, 4, 1024,
                          {"owt_variant": "b", "fc_updates_per_step": 4}),
               "data8": ("alexnet_owt", "data", 8, 1, 1024, {})},
    trainer_batches=(256, 512),
    trainer_args=("--config.image_size=224",
                  "--config.synthetic_examples=2048", "--config.num_train_steps=300",
                  "--config.log_every_steps=50", "--config.eval_every_steps=300",
                  "--config.checkpoint_every_steps=150"),
    trainer_profile_steps=20)  # steps 2–21, inside the first log window of 50.
DRY = Sizes(
    image_size=64, classes=10, models=("alexnet_owt_tiny",), dtypes=("bfloat16",),
    batches=(8,), steps=2, warmup=1,
    mock_runs={"hybrid4": ("alexnet_tiny", "hybrid", 2, 2, 16, {})},
    trainer_batches=(16,),
    trainer_args=("--config.image_size=64", "--config.synthetic_examples=64",
                  "--config.num_train_steps=6", "--config.log_every_steps=3",
                  "--config.eval_every_steps=6", "--config.checkpoint_every_steps=3"),
    trainer_profile_steps=2,  # steps 2–3, in the first window: the second is the median's.
    cpu_gemm_n=1024)  # an eighth of 2048²'s arithmetic: a dry run's MFU is a code path.

# Compiler options to try against XLA's defaults on each platform (tuning); each is one
# hypothesis about what the profile may show.
# (`xla_gpu_autotune_level: 0` was tried on the H200 and dropped: without autotuning XLA picked
# convolution algorithms that made the step 770× slower — 73 images/s; docs/gpu.md.)
OPTION_VARIANTS = {
    "gpu": {"no triton gemm (cuBLAS for the FC layers)": {"xla_gpu_enable_triton_gemm": False}},
    "cpu": {"LLVM optimisation level 1": {"xla_backend_optimization_level": 1}},
}


def _config(model: str, dtype: str, batch: int, sizes: Sizes, **overrides):
  config = default.for_scheme("single", 1, 1, global_batch_size=batch)
  config.update(model=model, dtype=dtype, image_size=sizes.image_size, **overrides)
  return config


def _median(times) -> float:
  return float(np.median(times))


def measure_step(config, sizes: Sizes, *, compiler_options=None) -> dict:
  """step_timing.measure at this run's sizes, each step waited for and pipelined."""
  return step_timing.measure(config, num_classes=sizes.classes, steps=sizes.steps,
                             warmup=sizes.warmup, compiler_options=compiler_options,
                             pipelined=True, cpu_gemm_n=sizes.cpu_gemm_n)


def environment() -> dict:
  device = jax.devices()[0]
  info = {"date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
          "jax": jax.__version__, "jaxlib": jaxlib.__version__, "backend": jax.default_backend(),
          "platform_version": getattr(device.client, "platform_version", None),
          "device_kind": device.device_kind, "device_count": jax.device_count(),
          "peaks": {dtype: step_timing.peak([device], dtype, None)[1]
                    for dtype in ("float32", "bfloat16")}}
  try:
    import torch
    info["torch"] = torch.__version__
  except ImportError:
    info["torch"] = None
  # What the suite runs against there: the machine's own packages, not the project's pins.
  info["packages"] = installed_requirements()
  # The driver and the clocks the card was found at (read, never set).
  info["nvidia_smi"] = _command_output(
      ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,"
       "power.limit", "--format=csv"])
  if device.platform == "gpu":
    info["target_config_check"] = target_config_check(
        device, accelerator_tables.nvidia_smi_card(info["nvidia_smi"]))
  return info


def installed_requirements() -> dict[str, str | None]:
  """The installed version of each package requirements.txt, requirements-imagenet.txt and
  requirements-test.txt name (None where it is missing)."""
  names = [r.name for file in ("requirements.txt", "requirements-imagenet.txt",
                               "requirements-test.txt")
           for r in runtime.read_requirements(os.path.join(ROOT, file), follow_includes=False)]
  versions = {}
  for name in dict.fromkeys(names):
    try:
      versions[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      versions[name] = None
  return versions


def _command_output(command: list[str]) -> str | None:
  try:
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
  except (OSError, subprocess.SubprocessError):
    return None
  return result.stdout.strip() if result.returncode == 0 else None


def target_config_check(device, card: dict) -> list[dict]:
  """The description of this GPU that compile-only nodes are compiled for
  (speed/gpu_topologies.GPUS, from datasheets) beside what the machine reports, field by field:
  the SM count (JAX), the boost clock and the memory (nvidia-smi's `card`), the L2 (PyTorch, in
  its own process so that this one's GPU memory stays JAX's)."""
  described = next((gpu for gpu in gpu_topologies.GPUS.values()
                    if gpu.name == device.device_kind), None)
  number = lambda key: float(card[key].split()[0]) if key in card else None  # noqa: E731
  memory_mib, clock_mhz = number("memory.total [MiB]"), number("clocks.max.sm [MHz]")
  l2 = _command_output([sys.executable, "-c", "import torch; "
                        "print(torch.cuda.get_device_properties(0).L2_cache_size)"])
  reported = {"name": device.device_kind, "sms": getattr(device, "core_count", None),
              "clock_ghz": clock_mhz / 1e3 if clock_mhz else None,
              "memory_bytes": int(memory_mib * 2**20) if memory_mib else None,
              "l2_bytes": int(l2.splitlines()[-1]) if l2 else None}
  rows = []
  for field, value in reported.items():
    ours = getattr(described, field) if described else None
    rows.append({"field": field, "target_config": ours, "machine": value,
                 "matches": None if ours is None or value is None else ours == value})
  return rows


def single_device(sizes: Sizes) -> list[dict]:
  rows = []
  for model in sizes.models:
    for dtype in sizes.dtypes:
      for batch in sizes.batches:
        rows.append(measure_step(_config(model, dtype, batch, sizes), sizes))
        print(json.dumps(rows[-1]), flush=True)
  return rows


def pytorch_worker(sizes: Sizes) -> list[dict]:
  """Runs in its own process (`--worker=pytorch`): every variant at every batch."""
  import torch
  device = "cuda" if torch.cuda.is_available() else "cpu"
  # Match XLA's default precision on NVIDIA GPUs: float32 convolutions and matmuls in TF32.
  torch.backends.cuda.matmul.allow_tf32 = True
  torch.backends.cudnn.allow_tf32 = True
  torch.backends.cudnn.benchmark = True
  rows = []
  for batch in sizes.batches:
    for name, options in torch_alexnet.GPU_VARIANTS.items():
      start = time.perf_counter()
      step = torch_alexnet.make_step(batch, sizes.image_size, sizes.classes, device=device,
                                     **options)
      step_timing.time_steps(step, 1 + sizes.warmup)  # the first compiles (torch.compile).
      setup_s = time.perf_counter() - start
      seconds = _median(step_timing.time_steps(step, sizes.steps))
      rows.append({"variant": name, "batch": batch, "images_per_sec": round(batch / seconds, 1),
                   "step_ms": round(1e3 * seconds, 2), "setup_s": round(setup_s, 1),
                   "device": device, "torch": torch.__version__})
      _emit(rows[-1])
      del step
      if device == "cuda":
        torch.cuda.empty_cache()
  return rows


def pytorch(*, timeout_s: float) -> dict:
  try:
    import torch  # noqa: F401  (only to say so when it is missing)
  except ImportError:
    return {"skipped": "PyTorch is not installed (it is not a dependency of the project)."}
  rows, error = _worker("pytorch", timeout_s=timeout_s)
  result = {"variants": rows}
  if error:  # what was measured before it stopped is kept, and why it stopped is said.
    result["incomplete"] = error
  return result


def compare_with_pytorch(report: dict, sizes: Sizes) -> None:
  """Ours ÷ the best PyTorch variant at each batch, for the target's model, into the pytorch
  section: done when the report is written, so that the two sections may come from different
  runs (--previous)."""
  sections = report["sections"]
  ours = sections.get("single_device", {}).get("result") or []
  torch_result = sections.get("pytorch", {}).get("result") or {}
  if "variants" not in torch_result:
    return
  comparison = []
  for batch in sizes.batches:
    measured = [r for r in torch_result["variants"] if r["batch"] == batch]
    if not measured:
      continue
    best = max(measured, key=lambda r: r["images_per_sec"])
    for r in ours:
      if r["model"] == sizes.goal[0] and r["batch"] == batch:
        comparison.append({"batch": batch, "dtype": r["dtype"],
                           "ours_images_per_sec": r["images_per_sec"],
                           "best_torch_variant": best["variant"],
                           "best_torch_images_per_sec": best["images_per_sec"],
                           "ratio": round(r["images_per_sec"] / best["images_per_sec"], 3)})
  torch_result["comparison"] = comparison


def profile(sizes: Sizes) -> dict:
  model, dtype, batch = sizes.goal
  step, *_ = step_timing.compile_step(_config(model, dtype, batch, sizes), sizes.classes)
  step_timing.time_steps(step, sizes.warmup)
  steps = max(2, sizes.steps // 5)
  with tempfile.TemporaryDirectory() as directory:
    jax.profiler.start_trace(directory)
    times = step_timing.time_steps(step, steps)
    jax.profiler.stop_trace()
    ops = trace_stats.top_ops(directory, steps=steps)
    device_ms = trace_stats.device_ms_per_step(directory, steps=steps)
    timeline = trace_stats.device_timeline(directory, steps=steps)
    # The trace itself, for reading in TensorBoard / Perfetto after the machine is gone.
    shutil.copy(trace_stats.newest_trace(directory), os.path.join(_OUT.value,
                                                                 "profile.trace.json.gz"))
  return {"model": model, "dtype": dtype, "batch": batch, "steps": steps,
          "step_ms_while_tracing": round(1e3 * _median(times), 2),
          "device_ms_per_step": device_ms, "timeline": timeline, "top_ops": ops}


def tuning(sizes: Sizes) -> list[dict]:
  """The target configuration changed one thing at a time; the baseline is timed first and again
  last, so that the spread between two timings of one program is in the table too."""
  model, dtype, batch = sizes.goal
  platform_name = jax.devices()[0].platform
  default_pool = experiment.for_platform("auto", layers.MAX_POOL_BY_PLATFORM, platform_name)
  other_pool = next(p for p in layers.MAX_POOLS if p != default_pool)
  default_stem = experiment.for_platform("auto", layers.STEM_CONV_BY_PLATFORM, platform_name)
  other_stem = next(p for p in layers.STEM_CONVS if p != default_stem)
  baseline = f"baseline (max_pool {default_pool}, stem_conv {default_stem})"
  # name -> (config overrides, compiler options, PRNG implementation)
  variants = {baseline: ({}, None, None),
              f"max_pool {other_pool}": (dict(max_pool=other_pool), None, None),
              f"stem_conv {other_stem}": (dict(stem_conv=other_stem), None, None),
              "no dropout": (dict(dropout_rate=0.0), None, None),
              "dropout bits from unsafe_rbg (not threefry)": ({}, None, "unsafe_rbg")}
  for name, options in OPTION_VARIANTS.get(platform_name, {}).items():
    variants[name] = ({}, options, None)
  if sizes is DRY:
    # The code paths, not the figures: one variant that changes a config field, the compiler
    # options and the PRNG implementation at once (one compile, not one per kind).
    changed = [f"max_pool {other_pool}", *OPTION_VARIANTS.get(platform_name, {}),
               "dropout bits from unsafe_rbg (not threefry)"]
    options = {k: v for variant in OPTION_VARIANTS.get(platform_name, {}).values()
               for k, v in variant.items()} or None
    variants = {baseline: variants[baseline],
                " + ".join(changed): (dict(max_pool=other_pool), options, "unsafe_rbg")}
  else:
    variants[baseline + ", again"] = variants[baseline]
  rows = []
  for name, (overrides, options, prng_impl) in variants.items():
    default_impl = jax.config.jax_default_prng_impl
    if prng_impl:  # the state's key, and so every key derived from it in the step.
      jax.config.update("jax_default_prng_impl", prng_impl)
    try:
      row = measure_step(_config(model, dtype, batch, sizes, **overrides), sizes,
                         compiler_options=options)
    finally:
      jax.config.update("jax_default_prng_impl", default_impl)
    rows.append({"variant": name, **row,
                 "vs_baseline": round(row["images_per_sec"] / rows[0]["images_per_sec"], 3)
                 if rows else 1.0})
    print(json.dumps(rows[-1]), flush=True)
  return rows


# The predicted 8-GPU step of a mocked run: its measured compute and its collectives through the
# time model (analysis/costmodel.py), on one H100/H200 node's NVLink and, for comparison, with
# each GPU on its own node behind a 400 Gb/s NIC (analysis/hardware.py).
MACHINES = {"nvlink": hardware.gpu_node("h100"),
            "nic": hardware.gpu_node("h100", gpus_per_node=1, nodes=8)}

# One mocked program compiles and runs in well under this; more is a hang (seen: data 8×1 on
# JAX 0.11.2 ran out its 291 s).
MOCK_WORKER_TIMEOUT_S = 120.0


def mock_worker(name: str, sizes: Sizes) -> dict:
  """Runs in its own process (`--worker=mock:NAME`) whose environment holds the mocked
  topology (or, dry, the simulated CPU devices)."""
  # A worker that hangs prints every thread's stack before its parent's time limit stops it.
  faulthandler.dump_traceback_later(MOCK_WORKER_TIMEOUT_S - 15, exit=False)
  topology = os.environ.get("JAX_MOCK_GPU_TOPOLOGY")
  if topology:
    # JAX 0.11.2 did not take it from the environment alone (one GPU device was all it saw);
    # the config option, set before the first device query, is the documented way.
    jax.config.update("jax_mock_gpu_topology", topology)
  model, scheme, data, model_ways, batch, overrides = sizes.mock_runs[name]
  config = _config(model, "bfloat16", batch, sizes, parallelism=scheme, **overrides)
  config.mesh.data, config.mesh.model = data, model_ways
  step, compile_s, compiled, _, devices = step_timing.compile_step(config, sizes.classes)
  step_timing.time_steps(step, sizes.warmup)
  seconds = _median(step_timing.time_steps(step, sizes.steps))
  hlo = compiled.as_text()
  stats = hlo_stats.collective_stats(hlo, len(devices))
  sent = sum(s.bytes_per_device for s in stats.values())
  asynchronous = hlo_stats.async_collectives(hlo)
  all_reduces = [c for c in asynchronous if c.kind == "all-reduce"]
  overlapped = sum(c.bytes for c in all_reduces if c.compute_ops_in_flight > 0)
  in_flight = hlo_stats.overlapped(hlo)  # what the prediction hides: a conv or matmul beside it.
  # Each collective as the program sends it; the mock skips them, so its step is compute alone.
  transfers = [costmodel.Transfer("program", "sent", sum(op.sent) / len(op.sent), len(op.sent),
                                  overlapped=op.name in in_flight)
               for op in hlo_stats.collectives(hlo, len(devices))]
  predicted = {name: costmodel.with_transfers(
      seconds, [dataclasses.replace(t, crosses_nodes=name == "nic") for t in transfers],
      machine)["step_s"] for name, machine in MACHINES.items()}
  hidden = sum(t.bytes for t in transfers if t.overlapped)
  step_ms = 1e3 * seconds
  return {"name": name, "config": name, "model": model, "scheme": scheme, **overrides,
          "mesh": [data, model_ways], "global_batch": batch, "devices": len(devices),
          "platform": devices[0].platform, "process_count": jax.process_count(),
          "step_ms": round(step_ms, 2), "compile_s": round(compile_s, 1),
          "bytes_per_device": sent, "exposed_bytes_per_device": round(sent - hidden),
          "predicted_step_ms": round(1e3 * predicted["nvlink"], 2),
          **time_model_prediction(config, sizes),
          "predicted_step_ms_over_nic": round(1e3 * predicted["nic"], 2),
          "async_all_reduces": len(all_reduces),
          "all_reduces_with_compute_in_flight": sum(c.compute_ops_in_flight > 0
                                                    for c in all_reduces),
          "all_reduce_bytes_with_compute_in_flight": overlapped,
          "all_reduce_bytes": sum(c.bytes for c in all_reduces)}


def time_model_prediction(config, sizes: Sizes) -> dict:
  """What the time model (analysis/costmodel.step_time) predicts for `config` on one 8-GPU node,
  before anything of this run is measured: its compute rate calibrated on the one-GPU steps of
  docs/gpu.json (an H200, 2026-11-23: speed/gpu_topologies.calibrated_node), its transfers the
  analytic minimum. `model_compute_ms` is what a mocked step measures (one device's compute; the
  mock skips the collectives), `model_step_ms` the whole step over NVLink."""
  machine = gpu_topologies.calibrated_node("h100", "1x1x8", model=config.model,
                                           dtype=config.dtype,
                                           measured=gpu_topologies.one_gpu_rows())
  plan = partitioning.make_plan(config.parallelism, config.mesh.data, config.mesh.model)
  predicted = costmodel.step_time(
      models.ARCHITECTURES[config.model], plan, machine, global_batch=config.global_batch_size,
      image_size=config.image_size, num_classes=sizes.classes, dtype=config.dtype,
      owt_variant=config.owt_variant, fc_updates_per_step=config.fc_updates_per_step)
  return {"model_compute_ms": round(1e3 * predicted["compute_s"], 2),
          "model_step_ms": round(1e3 * predicted["step_s"], 2),
          "model_calibrated_from": machine.calibrated_from}


def mock_multi_gpu(sizes: Sizes, *, deadline: float) -> list[dict]:
  rows = []
  for name, (_, _, data, model_ways, _, _) in sizes.mock_runs.items():
    devices = data * model_ways
    # Sharded autotuning waits for the other 7 processes, which do not exist (openxla/xla#28959:
    # the compile hang seen on the H200), unless it is off before the backend starts.
    env = ({"JAX_NUM_CPU_DEVICES": str(devices)} if _DRY_RUN.value else
           {"JAX_MOCK_GPU_TOPOLOGY": f"1x{devices}x1",
            "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") +
                          " --xla_gpu_shard_autotuning=false").strip()})
    remaining = min(deadline - time.perf_counter(), MOCK_WORKER_TIMEOUT_S)
    if remaining < 30:
      rows.append({"name": name, "error": "skipped: the time budget was spent"})
      continue
    # One scheme's failure leaves the others' rows.
    measured, error = _worker(f"mock:{name}", env=env, timeout_s=remaining)
    rows.append(measured[-1] if measured else {"name": name, "error": error})
    print(json.dumps(rows[-1]), flush=True)
  return rows


def trainer(sizes: Sizes, *, timeout_s: float) -> list[dict]:
  """`python main.py` (common/main_runs.py, as every benchmark that trains) against the bare
  step at the same settings, in the same call: the 1×1 `single` scheme with the target's model in
  bfloat16 on synthetic data, at each of `sizes.trainer_batches`. main.py traces a few steps
  after its first (the median leaves out the log windows that hold them): when the device
  worked and waited (trace_stats.device_timeline; the trace is copied to --out)."""
  model = sizes.goal[0]
  deadline = time.perf_counter() + timeout_s
  rows = []
  with tempfile.TemporaryDirectory() as workdirs:
    for batch in sizes.trainer_batches:
      overrides = (f"--config.model={model}", "--config.dtype=bfloat16",
                   "--config.dataset=synthetic", f"--config.global_batch_size={batch}",
                   *sizes.trainer_args)
      run = main_runs.run_config(
          "single", workdirs, overrides=overrides, run_name=f"single_{batch}",
          timeout_s=max(deadline - time.perf_counter(), 30.0),
          profile_steps=sizes.trainer_profile_steps,
          trace_to=os.path.join(_OUT.value, f"trainer_{batch}.trace.json.gz"))
      step = measure_step(_config(model, "bfloat16", batch, sizes), sizes)
      rows.append({"model": model, "dtype": "bfloat16", "batch": batch,
                   **main_runs.against_step(run, step),
                   "final_train_loss": run["final_train_loss"], "eval_loss": run["eval_loss"],
                   "overrides": run["overrides"]})
      print(json.dumps(rows[-1]), flush=True)
  return rows


def notebook(sizes: Sizes, *, timeout_s: float) -> dict:
  try:
    import nbclient
    import nbformat
  except ImportError as e:
    return {"skipped": f"{e.name} is not installed (pip install nbclient ipykernel)."}
  path = os.path.join(ROOT, "notebooks", "colab.ipynb")
  book = nbformat.read(path, as_version=4)
  steps = 20 if sizes is DRY else 300
  env = {"NOTEBOOK_STEPS": str(steps), "NOTEBOOK_CONFIG": "single"}
  old = {k: os.environ.get(k) for k in env}
  os.environ.update(env)  # the kernel inherits this process's environment.
  start = time.perf_counter()
  try:
    nbclient.NotebookClient(book, timeout=int(timeout_s), kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(path)}}).execute()
  finally:
    for k, v in old.items():
      if v is None:
        os.environ.pop(k, None)
      else:
        os.environ[k] = v
  train_cell = next(c for c in book.cells if "train" in c.metadata.get("tags", []))
  printed = "".join(o.get("text", "") for o in train_cell.outputs if o.output_type == "stream")
  final = json.loads(printed.strip().splitlines()[-1])
  timing = train_cell.metadata["execution"]  # nbclient's record of the cell's start and end.
  cell_s = (datetime.datetime.fromisoformat(timing["shell.execute_reply"]) -
            datetime.datetime.fromisoformat(timing["iopub.execute_input"])).total_seconds()
  return {"seconds": round(time.perf_counter() - start, 1), "final": final,
          "notebook_platform": final["platform"], "config": final["config"],
          "model": final["model"], "global_batch": final["global_batch"],
          "train_cell_s": round(cell_s, 1),
          # The training cell's whole time: compile and evaluations included.
          "images_per_sec": round(final["steps"] * final["global_batch"] / cell_s, 1)}


def suite(*, timeout_s: float) -> dict:
  """The test suite under this machine's JAX, on CPU devices as in CI (tests/__init__.py): one
  pytest worker per core; tests that need what the machine lacks (TensorFlow) skip and say so."""
  workers = 1 if _DRY_RUN.value else len(os.sched_getaffinity(0))  # the cores it may use
  command = [sys.executable, "-m", "pytest", "-q", "-rfEs", "-n", str(workers), "--dist",
             "loadscope", "-p", "no:cacheprovider"]
  command += ["tests/conventions_test.py"] if _DRY_RUN.value else ["tests"]
  start = time.perf_counter()
  try:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                            timeout=timeout_s, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    output, returncode = result.stdout + result.stderr, result.returncode
  except subprocess.TimeoutExpired as e:
    output = (e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or "")
    returncode = None
  counts = pytest_counts(output)
  return {"suite_jax": jax.__version__, "suite_python": platform.python_version(),
          "suite_passed": counts.get("passed", 0), "suite_failed": counts.get("failed", 0),
          "suite_errors": counts.get("error", 0), "suite_skipped": counts.get("skipped", 0),
          "skipped_tests": [line for line in output.splitlines() if line.startswith("SKIPPED")],
          "failed_tests": [line for line in output.splitlines()
                           if line.startswith(("FAILED", "ERROR"))],
          "workers": workers, "seconds": round(time.perf_counter() - start, 1),
          "returncode": returncode, "tail": output[-3000:]}


def pytest_counts(output: str) -> dict:
  """{"passed": 393, "skipped": 2, ...} from pytest's last summary line ("393 passed, 2 skipped
  in 341.70s"); {} if it has none (the run was stopped)."""
  summary = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed)", line)]
  if not summary:
    return {}
  return {kind.rstrip("s"): int(n) for n, kind in
          re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)",
                     summary[-1])}


def _emit(row: dict) -> None:
  """A worker's measured row: appended to --worker_rows at once, so that a worker stopped by
  its time limit (or failing later) still hands back what it measured."""
  print(json.dumps(row), file=sys.stderr, flush=True)
  with open(_WORKER_ROWS.value, "a") as f:
    f.write(json.dumps(row) + "\n")


def _worker(part: str, *, timeout_s: float, env: dict | None = None) -> tuple[list, str | None]:
  """Runs `--worker=part` in a fresh process for at most `timeout_s`.

  Returns (the rows it measured, None) or, if it failed or ran out of time, (the rows measured
  before that, why it stopped).
  """
  with tempfile.TemporaryDirectory() as directory:
    rows_path = os.path.join(directory, "rows.jsonl")
    command = [sys.executable, "-m", "benchmarks.speed.accelerator", f"--worker={part}",
               f"--worker_rows={rows_path}"]
    if _DRY_RUN.value:
      command.append("--dry_run")
    error = None
    try:
      result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout_s, env={**os.environ, **(env or {})})
      if result.returncode != 0:
        error = f"worker {part} exited {result.returncode}: {result.stderr[-1500:]}"
    except subprocess.TimeoutExpired as e:
      stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
      error = (f"worker {part} stopped at its time limit ({timeout_s:.0f} s); its last "
               f"output: {stderr[-2500:]}")
    rows = []
    if os.path.exists(rows_path):
      with open(rows_path) as f:
        rows = [json.loads(line) for line in f]
  return rows, error


def _write(report: dict, *, previous_records: list[dict]) -> None:
  """Writes accelerator.json: `report` with its record, which names this run's machine and
  command after those of the reports merged into it (--previous), each once."""
  made_now = benchmarks.record(software=("torch",))

  def every_runs(field: str) -> str:
    return "; ".join(dict.fromkeys([r[field] for r in previous_records] + [made_now[field]]))

  content = benchmarks.with_record(report, software=("torch",), machine=every_runs("machine"),
                                   command=every_runs("command"))
  with open(os.path.join(_OUT.value, "accelerator.json"), "w") as f:
    json.dump(benchmarks.without_machine_paths(content), f, indent=1)


def main(argv):
  del argv
  platforms.start()  # before anything queries the devices.
  sizes = DRY if _DRY_RUN.value else PAPER
  if _WORKER.value:
    if _WORKER.value == "pytorch":
      pytorch_worker(sizes)
    else:
      _emit(mock_worker(_WORKER.value.split(":", 1)[1], sizes))
    return
  os.makedirs(_OUT.value, exist_ok=True)
  report = {"dry_run": _DRY_RUN.value, "sections": {}}
  previous_records = []
  for path in _PREVIOUS.value:
    previous_record, previous = benchmarks.load_results(path)
    report["sections"].update(previous["sections"])
    previous_records.append(previous_record)
  start = time.perf_counter()
  deadline = start + _BUDGET.value
  remaining = lambda: max(deadline - time.perf_counter(), 30.0)  # noqa: E731
  run = {"environment": environment, "single_device": lambda: single_device(sizes),
         "pytorch": lambda: pytorch(timeout_s=remaining()),
         "profile": lambda: profile(sizes), "tuning": lambda: tuning(sizes),
         "mock_multi_gpu": lambda: mock_multi_gpu(sizes, deadline=deadline),
         "trainer": lambda: trainer(sizes, timeout_s=remaining()),
         "notebook": lambda: notebook(sizes, timeout_s=remaining()),
         "suite": lambda: suite(timeout_s=remaining())}
  for name in SECTIONS:
    if name not in _SECTIONS.value:
      continue
    elapsed = time.perf_counter() - start
    if elapsed > _BUDGET.value:
      report["sections"][name] = {"skipped": f"the budget of {_BUDGET.value:.0f} s was spent "
                                             f"({elapsed:.0f} s)"}
      continue
    print(f"== {name} ({elapsed:.0f} s in)", file=sys.stderr, flush=True)
    section_start = time.perf_counter()
    try:
      report["sections"][name] = {"result": run[name]()}
    except (Exception, main_runs.RunFailed):  # noqa: BLE001 — one broken section must not cost
      # the others' figures.
      report["sections"][name] = {"error": traceback.format_exc()[-3000:]}
    report["sections"][name]["seconds"] = round(time.perf_counter() - section_start, 1)
    # After every section: a timeout keeps what was measured.
    _write(report, previous_records=previous_records)
  report["seconds"] = round(time.perf_counter() - start, 1)
  compare_with_pytorch(report, sizes)
  _write(report, previous_records=previous_records)
  markdown = accelerator_tables.report(benchmarks.without_machine_paths(report))
  with open(os.path.join(_OUT.value, "accelerator.md"), "w") as f:
    f.write(markdown)
  print(markdown)


if __name__ == "__main__":
  app.run(main)
