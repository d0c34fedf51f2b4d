r"""The single-device AlexNet training step here against PyTorch eager on the same CPU, as JSON.

  pip install torch==2.13.0      # optional, for this script only; not in requirements.txt
  python -m benchmarks.speed.pytorch_reference [--batch=32 --image_size=224 --rounds=7 --steps=3]
                                               [--out=DIR | --publish]

Both sides train the one-column AlexNet (`alexnet_owt`, torchvision's layer sizes: 64-192-384-256-
256 convs, 4096-4096 FC, 1000 classes, dropout 0.5) on one synthetic batch of 224² float32 images,
SGD with momentum 0.9 and weight decay 5e-4 (ours on the weights, PyTorch's on every parameter:
the biases add 0.02% to the update's work), a whole step each: forward, backward, update, loss
back on the host. The two are timed *alternately* — `--rounds` rounds of `--steps` steps of one
framework, then of the other, each turn after a short pause and one untimed step (so neither
pays for the other's still-spinning worker threads) — so the machine's background load falls on
both alike; the figures are medians over all timed steps. Each framework runs in a worker process
of its own, driven by this one (in one process the two runtimes slow each other down). Prints
one JSON object with both rates and `ratio` = ours / PyTorch's images/s (≥ 1.0: not behind).
PyTorch keeps its default intra-op thread count (every core); JAX's XLA:CPU runs the whole step
as one compiled program. `--notune_xla_cpu` measures our step with XLA's default options.
Writes pytorch_reference.json (pytorch_reference_untuned.json with --notune_xla_cpu) under
runs/pytorch_reference/ (or --out; with --publish into docs/, which docs/performance.md quotes).
"""

import json
import os
import subprocess
import sys
import time

import jax
import numpy as np
from absl import app, flags

import benchmarks
from benchmarks.common import step_timing, torch_alexnet
from configs import default
from hybrid_parallel import platforms

ROOT = benchmarks.ROOT

_BATCH = flags.DEFINE_integer("batch", 32, "Images per step.")
_SIZE = flags.DEFINE_integer("image_size", 224, "Image side.")
_CLASSES = flags.DEFINE_integer("classes", 1000, "Classifier width.")
_ROUNDS = flags.DEFINE_integer("rounds", 7, "Alternations of the two frameworks.")
_STEPS = flags.DEFINE_integer("steps", 3, "Timed steps per framework per round.")
_WARMUP = flags.DEFINE_integer("warmup", 2, "Untimed steps of each after its first.")
_WORKER = flags.DEFINE_enum("worker", None, ["jax", "torch"], "Internal: serve one framework's "
                             "step to the parent process.")
_PAUSE = flags.DEFINE_float("pause_s", 0.5, "Idle seconds before each framework's turn.")
_OUTPUT = benchmarks.define_output_flags("pytorch_reference")
_TUNE = flags.DEFINE_bool("tune_xla_cpu", True, "Compile our step with xla_options' CPU options "
                          "(False: XLA's defaults, to measure what the options give).")


def torch_step(batch: int, size: int, classes: int):
  """PyTorch's eager CPU training step for torchvision's AlexNet layout, as a no-argument
  callable, with PyTorch's version and thread count."""
  import torch
  return (torch_alexnet.make_step(batch, size, classes), torch.__version__,
          torch.get_num_threads())


def jax_step(batch: int, size: int, classes: int, *, tune_xla_cpu: bool):
  """This codebase's single-device training step for the same model, as a no-argument callable."""
  config = default.for_scheme("single", 1, 1, global_batch_size=batch)
  config.model, config.image_size = "alexnet_owt", size
  config.momentum, config.weight_decay = 0.9, 5e-4
  config.tune_xla_cpu = tune_xla_cpu
  step, compile_s, _, _, _ = step_timing.compile_step(config, classes)
  return step, jax.__version__, compile_s


def serve(framework: str) -> None:
  """Worker: builds one framework's step, then answers each line `N` on stdin with the seconds of
  one untimed and N timed steps (a JSON list; the untimed one warms the threads back up)."""
  batch, size, classes = _BATCH.value, _SIZE.value, _CLASSES.value
  if framework == "jax":
    step, version, compile_s = jax_step(batch, size, classes, tune_xla_cpu=_TUNE.value)
    info = {"jax_version": version, "jax_compile_s": round(compile_s, 1)}
  else:
    step, version, threads = torch_step(batch, size, classes)
    info = {"torch_version": version, "torch_threads": threads}
  step_timing.time_steps(step, 1 + _WARMUP.value)
  print(json.dumps(info), flush=True)
  for line in sys.stdin:
    step()
    print(json.dumps(step_timing.time_steps(step, int(line))), flush=True)


def main(argv):
  del argv
  platforms.start()  # before anything queries the devices.
  if _WORKER.value:
    return serve(_WORKER.value)
  try:
    import torch  # noqa: F401  (only to fail early with one sentence)
  except ImportError:
    sys.exit("error: this comparison needs PyTorch: pip install torch==2.13.0 (it is not a "
             "dependency of the project).")
  batch = _BATCH.value
  # One process per framework: two runtimes in one process slow each other down (a torch op
  # run once left our step ~10% slower for good here), which no user would see.
  forwarded = [f"--{f}={flags.FLAGS[f].value}" for f in ("batch", "image_size", "classes",
                                                          "warmup", "tune_xla_cpu")]
  workers = {name: subprocess.Popen([sys.executable, "-m", "benchmarks.speed.pytorch_reference",
                                     f"--worker={name}", *forwarded], cwd=ROOT,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for name in ("jax", "torch")}
  info = {}
  for worker in workers.values():  # they build and compile one after the other.
    info.update(json.loads(worker.stdout.readline()))
  times = {"jax": [], "torch": []}
  for round_index in range(_ROUNDS.value):
    for name, worker in workers.items():
      time.sleep(_PAUSE.value)  # the other's worker threads may still be spinning.
      worker.stdin.write(f"{_STEPS.value}\n")
      worker.stdin.flush()
      times[name] += json.loads(worker.stdout.readline())
    print(f"round {round_index + 1}/{_ROUNDS.value}: jax "
          f"{np.median(times['jax'][-_STEPS.value:]) * 1e3:.0f} ms, torch "
          f"{np.median(times['torch'][-_STEPS.value:]) * 1e3:.0f} ms", file=sys.stderr)
  for worker in workers.values():
    worker.stdin.close()
    worker.wait()
  rates = {name: batch / float(np.median(t)) for name, t in times.items()}
  result = {
      "model": "alexnet_owt", "global_batch": batch, "image_size": _SIZE.value,
      "classes": _CLASSES.value, "optimizer": "SGD momentum 0.9, weight decay 5e-4",
      "dtype": "float32", **info, "cpu_count": os.cpu_count(), "tune_xla_cpu": _TUNE.value,
      "jax_images_per_sec": round(rates["jax"], 1),
      "torch_images_per_sec": round(rates["torch"], 1),
      "jax_step_ms": {q: round(1e3 * float(np.percentile(times["jax"], p)), 1)
                      for q, p in (("p10", 10), ("median", 50), ("p90", 90))},
      "torch_step_ms": {q: round(1e3 * float(np.percentile(times["torch"], p)), 1)
                        for q, p in (("p10", 10), ("median", 50), ("p90", 90))},
      "timed_steps_each": len(times["jax"]),
      "ratio": round(rates["jax"] / rates["torch"], 3),
  }
  print(json.dumps(result))
  benchmarks.publish(result, _OUTPUT.path(
      "pytorch_reference.json" if _TUNE.value else "pytorch_reference_untuned.json"),
                     software=("torch",))


if __name__ == "__main__":
  app.run(main)
