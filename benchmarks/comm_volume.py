r"""Bytes and messages of every collective in one training step, read from the compiled HLO.

  python benchmarks/comm_volume.py --config=configs/hybrid4.py [--paper_sizes]
  python benchmarks/comm_volume.py --all --paper_sizes      # the README's table

For the config's scheme and mesh, compiles the real train step (abstract inputs: nothing is
allocated or run), counts each collective kind with `hybrid_parallel.hlo_stats`, and prints one
JSON object per config next to the analytic minimum of `hybrid_parallel.costmodel`.
--paper_sizes uses 224² inputs and 1000 classes (the papers' AlexNet) instead of the config's.
"""

import json
import os
import sys

from absl import app, flags
from ml_collections import config_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.")
_ALL = flags.DEFINE_bool("all", False, "Every Table-1 config and owt8; writes a Markdown table.")
_PAPER = flags.DEFINE_bool("paper_sizes", False, "224² inputs and 1000 classes.")
_CLASSES = flags.DEFINE_integer("num_classes", 10, "Classifier width (without --paper_sizes).")
_OUT = flags.DEFINE_string("out", "runs/comm_volume", "Where --all writes its table.")
TABLE1 = ("single", "data2", "data4", "model2", "hybrid4", "owt8")


def measure(config, paper_sizes: bool, num_classes: int) -> dict:
  """Compiles one config's train step and returns its traffic (HLO and analytic) as a dict."""
  # Imported here: main() must set the CPU device count before anything queries the devices.
  import jax
  import jax.numpy as jnp
  from jax.sharding import NamedSharding
  from hybrid_parallel import costmodel, hlo_stats, models, optim, partitioning, schemes

  image_size, classes = (224, 1000) if paper_sizes else (config.image_size, num_classes)
  config = config.copy_and_resolve_references()
  config.image_size = image_size
  plan = partitioning.plan(config.parallelism, config.mesh.data, config.mesh.model)
  partitioning.check_batch(plan, config.global_batch_size)
  mesh = schemes.make_mesh(config, plan)
  schedule = optim.learning_rate_schedule(config, config.global_batch_size, 100, 1000)
  _, _, scheme = schemes.setup(config, plan, mesh, classes, 3, schedule, abstract=True)
  batch = config.global_batch_size
  sharding = NamedSharding(mesh, plan.batch_spec)
  images = jax.ShapeDtypeStruct((batch, image_size, image_size, 3), jnp.float32,
                                sharding=sharding)
  labels = jax.ShapeDtypeStruct((batch,), jnp.int32, sharding=sharding)
  hlo = scheme.train_step.lower(scheme.state, images, labels).compile().as_text()
  stats = hlo_stats.collective_stats(hlo, plan.data * plan.model)
  analytic = costmodel.traffic(models.ARCHITECTURES[config.model], plan, batch, image_size,
                               classes)
  return {
      "scheme": config.parallelism, "mesh": [plan.data, plan.model], "model": config.model,
      "global_batch": batch, "image_size": image_size, "num_classes": classes,
      "grad_reduce": config.grad_reduce,
      "hlo": {kind: vars(s) for kind, s in stats.items() if s.ops},
      "hlo_bytes_per_device": sum(s.bytes_per_device for s in stats.values()),
      "hlo_busiest_device_bytes": hlo_stats.busiest_device_bytes(hlo, plan.data * plan.model),
      "analytic_bytes_per_device": {"gradients": analytic.gradients,
                                    "activations": analytic.activations,
                                    "total": analytic.total},
  }


def main(argv):
  del argv
  if not _ALL.value:
    if _CONFIG.value is None:
      raise app.UsageError("give --config=... or --all")
    devices = _CONFIG.value.mesh.data * _CONFIG.value.mesh.model
    import jax
    jax.config.update("jax_num_cpu_devices", max(devices, 1))
    print(json.dumps(measure(_CONFIG.value, _PAPER.value, _CLASSES.value)))
    return
  import importlib
  import jax
  jax.config.update("jax_num_cpu_devices", 8)
  rows = []
  for name in TABLE1:
    config = importlib.import_module(f"configs.{name}").get_config()
    result = {"config": name, **measure(config, _PAPER.value, _CLASSES.value)}
    print(json.dumps(result), flush=True)
    rows.append(result)
  mb = lambda x: f"{x / 1e6:.1f}"
  lines = ["| config | mesh | batch | HLO: all-reduce | all-gather | reduce-scatter | "
           "collective-permute | HLO total MB | analytic MB (gradients + activations) |",
           "|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    cell = lambda kind: (f"{mb(r['hlo'][kind]['bytes_per_device'])} ({r['hlo'][kind]['ops']})"
                         if kind in r["hlo"] else "—")
    a = r["analytic_bytes_per_device"]
    lines.append(f"| {r['config']} | {r['mesh'][0]}×{r['mesh'][1]} | {r['global_batch']} | "
                 f"{cell('all-reduce')} | {cell('all-gather')} | {cell('reduce-scatter')} | "
                 f"{cell('collective-permute')} | {mb(r['hlo_bytes_per_device'])} | "
                 f"{mb(a['total'])} ({mb(a['gradients'])} + {mb(a['activations'])}) |")
  print("\n".join(lines))
  os.makedirs(_OUT.value, exist_ok=True)
  with open(os.path.join(_OUT.value, "comm_volume.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
  with open(os.path.join(_OUT.value, "comm_volume.json"), "w") as f:
    json.dump(rows, f, indent=1)


if __name__ == "__main__":
  app.run(main)
