r"""Training throughput of one config: images/s, step time, MFU and bytes moved, as JSON.

  python -m benchmarks.speed.throughput --config=configs/hybrid4.py [--config.backend=gspmd]
  python -m benchmarks.speed.throughput --all          # Table-1 configs + owt8, every backend

Synthetic data (random images and labels at the config's image size; `--num_classes`), a warm-up
of `--warmup` steps after the compile, then `--steps` timed steps, each waited for. Prints one JSON
object per run:

  config, backend, scheme, dtype, tune_xla_cpu, mesh, devices, platform, device_kind, model,
  global_batch, image_size, images_per_sec (from the median step), step_time_ms {median, p10,
  p90}, steps, compile_s, model_flops_per_image, flops_convention, mfu, peak_flops, peak_source,
  hlo_busiest_device_bytes.

FLOPs: the model's (`costmodel.training_flops_per_image`), 1 multiply-add = 2 FLOPs, backward =
2 × forward, so training = 3 × forward; whatever a scheme adds (collectives, recomputation) is not
counted. Peak: on a GPU the device's stated dense peak for the dtype × devices; on the CPU the
float32 GEMM rate measured in the same run (best of ten 2048² matmuls, XLA:CPU using every
core) — the CPU is one machine however many devices are simulated on it, so its peak is not
multiplied.

--all writes throughput.json and throughput.png under runs/throughput/ (or --out; with --publish
into docs/, refreshing the table of docs/performance.md), with each config's step time per image relative to `single` (on a shared
CPU, the overhead of the parallel machinery: 1.0 = none).
"""

import json
import os

import jax
import numpy as np
from absl import app, flags
from ml_collections import config_flags

import benchmarks
import configs
import experiment
from benchmarks.common import config_or_all, step_timing
from benchmarks.speed import tables
from hybrid_parallel import models, platforms
from hybrid_parallel.analysis import costmodel, hlo_stats
from hybrid_parallel.errors import UserError
from hybrid_parallel.steps import common

_CONFIG, _ALL = config_or_all.define_flags(all_help="Table-1 configs and owt8 under every backend.")
_STEPS = flags.DEFINE_integer("steps", 10, "Timed steps.")
_WARMUP = flags.DEFINE_integer("warmup", 2, "Untimed steps after the compile.")
_CLASSES = flags.DEFINE_integer("num_classes", 10, "Classifier width.")
_OUTPUT = benchmarks.define_output_flags("throughput")  # where --all writes throughput.{json,png}.


def measure(config, cpu_flops: float | None) -> dict:
  """Compiles and times one config's train step on synthetic data."""
  step, compile_s, compiled, plan, devices = step_timing.compile_step(config, _CLASSES.value)
  step_timing.time_steps(step, _WARMUP.value)
  times = step_timing.time_steps(step, _STEPS.value)
  batch, size = config.global_batch_size, config.image_size
  median = float(np.median(times))
  flops = costmodel.training_flops_per_image(models.ARCHITECTURES[config.model], size,
                                             _CLASSES.value)
  peak_flops, peak_source = step_timing.peak(devices, config.dtype, cpu_flops)
  return {
      "config": None, "backend": config.backend, "scheme": plan.scheme, "dtype": config.dtype,
      "tune_xla_cpu": config.tune_xla_cpu,
      "mesh": [plan.data, plan.model], "devices": len(devices), "platform": devices[0].platform,
      "device_kind": devices[0].device_kind, "model": config.model, "global_batch": batch,
      "image_size": size, "images_per_sec": round(batch / median, 1),
      "step_time_ms": {"median": round(1e3 * median, 1),
                       "p10": round(1e3 * float(np.percentile(times, 10)), 1),
                       "p90": round(1e3 * float(np.percentile(times, 90)), 1)},
      "steps": len(times), "compile_s": round(compile_s, 1),
      "model_flops_per_image": flops,
      "flops_convention": "1 multiply-add = 2 FLOPs; training = 3 × forward",
      "mfu": round(flops * batch / median / peak_flops, 4), "peak_flops": peak_flops,
      "peak_source": peak_source,
      "hlo_busiest_device_bytes": hlo_stats.busiest_device_bytes(compiled.as_text(),
                                                                 len(devices)),
  }


def _plot(rows, path: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(9, 4))
  width = 0.8 / len(common.BACKENDS)
  for i, backend in enumerate(common.BACKENDS):
    ours = [(configs.TABLE1.index(r["config"]), r["images_per_sec"]) for r in rows
            if r["backend"] == backend]
    ax.bar([j + i * width for j, _ in ours], [v for _, v in ours], width, label=backend)
  ax.set_xticks([j + width * (len(common.BACKENDS) - 1) / 2 for j in range(len(configs.TABLE1))],
                configs.TABLE1)
  ax.set_ylabel("training images/s")
  ax.set_title(f"AlexNet training throughput ({rows[0]['platform']}, {rows[0]['image_size']}²)")
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=120)


def main(argv):
  del argv
  platforms.start(cpu_devices=8)
  cpu_flops = step_timing.cpu_gemm_flops() if jax.devices()[0].platform == "cpu" else None
  if not _ALL.value:
    result = measure(_CONFIG.value, cpu_flops)
    result["config"] = os.path.splitext(os.path.basename(
        config_flags.get_config_filename(flags.FLAGS["config"])))[0]
    print(json.dumps(result))
    return
  rows = []
  for backend in common.BACKENDS:
    for name in configs.TABLE1:
      config = configs.get(name)
      config.backend = backend
      try:
        experiment.resolve(config)
      except UserError:
        continue  # pmap runs single and data only.
      result = dict(measure(config, cpu_flops), config=name)
      print(json.dumps(result), flush=True)
      rows.append(result)
  print(tables.throughput(rows))
  benchmarks.publish(rows, _OUTPUT.path("throughput.json"))
  _plot(rows, _OUTPUT.path("throughput.png"))


if __name__ == "__main__":
  app.run(main)
