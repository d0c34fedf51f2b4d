r"""Bytes and messages of every collective in one training step, read from the compiled HLO.

  python -m benchmarks.communication.comm_volume --config=configs/hybrid4.py [--paper_sizes]
  python -m benchmarks.communication.comm_volume --all --paper_sizes --publish  # docs/comm_volume.json

--all: every Table-1 config and owt8 with XLA's psum, owt8 with Krizhevsky's FC passes (b) and
(c) (`owt_variant`), data4 with each of the papers' all-reduce algorithms (`grad_reduce`), and
the local-SGD schemes on 4 replicas: model averaging by each of Su et al.'s methods
(`average_method`) and A-SGD — their rows count what one replica sends per meeting and, as the
compiled program lists them, in every branch of its meeting (costmodel.local_sgd_traffic).

For the config's scheme and mesh, compiles the real train step (abstract inputs: nothing is
allocated or run), counts each collective kind with `hybrid_parallel.analysis.hlo_stats` and
prints one JSON object per config next to the analytic minimum of
`hybrid_parallel.analysis.costmodel`.
--paper_sizes uses 224² inputs and 1000 classes (the papers' AlexNet) instead of the config's.
"""

import json

from absl import app, flags

import benchmarks
import configs
import experiment
from benchmarks.common import config_or_all
from benchmarks.communication import tables
from hybrid_parallel import collectives, models, platforms
from hybrid_parallel.analysis import costmodel, hlo_stats
from hybrid_parallel.local_sgd import averaging

_CONFIG, _ALL = config_or_all.define_flags(
    all_help="Every Table-1 config and owt8, and data4 with every grad_reduce; writes "
    "comm_volume.json.")
_PAPER = flags.DEFINE_bool("paper_sizes", False, "224² inputs and 1000 classes.")
_CLASSES = flags.DEFINE_integer("num_classes", 10, "Classifier width (without --paper_sizes).")
_OUTPUT = benchmarks.define_output_flags("comm_volume")  # where --all writes comm_volume.json.


def measure(config, *, paper_sizes: bool, num_classes: int) -> dict:
  """Compiles one config's train step and returns its traffic (HLO and analytic) as a dict."""
  image_size, classes = (224, 1000) if paper_sizes else (config.image_size, num_classes)
  config = config.copy_and_resolve_references()
  config.image_size = image_size
  step = experiment.lower_train_step(experiment.resolve(config), num_classes=classes)
  plan, batch = step.run.plan, config.global_batch_size
  hlo = step.lowered.compile().as_text()
  stats = hlo_stats.collective_stats(hlo, plan.data * plan.model)
  arch = models.ARCHITECTURES[config.model]
  if plan.local_sgd:
    exchange = ("parameter_server" if config.parallelism == "asgd" else config.average_method)
    meeting = costmodel.local_sgd_traffic(arch, replicas=plan.data, exchange=exchange,
                                          image_size=image_size, num_classes=classes,
                                          with_momentum=config.average_momentum)
    analytic = costmodel.Traffic(gradients=meeting["in_program"])
  else:
    meeting = None
    analytic = costmodel.traffic(arch, plan, global_batch=batch, image_size=image_size,
                                 num_classes=classes)
  return {
      "scheme": config.parallelism, "mesh": [plan.data, plan.model], "model": config.model,
      "global_batch": batch, "image_size": image_size, "num_classes": classes,
      "grad_reduce": config.grad_reduce, "owt_variant": config.owt_variant,
      "hlo": {kind: vars(s) for kind, s in stats.items() if s.ops},
      "hlo_bytes_per_device": sum(s.bytes_per_device for s in stats.values()),
      "hlo_busiest_device_bytes": hlo_stats.busiest_device_bytes(hlo, plan.data * plan.model),
      "analytic_bytes_per_device": {"gradients": analytic.gradients,
                                    "activations": analytic.activations,
                                    "total": analytic.total},
      **({"average_method": config.average_method if config.parallelism == "averaging" else None,
          "analytic_bytes_per_meeting": meeting["per_sync"]} if meeting else {}),
  }


def main(argv):
  del argv
  if not _ALL.value:
    platforms.start(cpu_devices=_CONFIG.value.mesh.data * _CONFIG.value.mesh.model)
    print(json.dumps(measure(_CONFIG.value, paper_sizes=_PAPER.value,
                             num_classes=_CLASSES.value)))
    return
  platforms.start(cpu_devices=8)
  runs = [(name, "psum", "a") for name in configs.TABLE1]
  runs += [("owt8", "psum", variant) for variant in ("b", "c")]  # Krizhevsky's FC passes.
  runs += [(tables.COMM_VOLUME_ALGORITHMS_CONFIG, a, "a") for a in collectives.ALGORITHMS
           if a != "psum"]
  # The local-SGD schemes: averaging4 by each method, and A-SGD on the same mesh.
  runs += [("averaging4", "psum", method) for method in averaging.METHODS]
  runs += [("asgd4", "psum", None)]
  rows = []
  for name, algorithm, variant in runs:
    config = configs.get("averaging4" if name == "asgd4" else name)
    config.grad_reduce = algorithm
    if name == "averaging4":
      config.average_method = variant
    elif name == "asgd4":
      config.parallelism = "asgd"
    else:
      config.owt_variant = variant
    result = {"config": name, **measure(config, paper_sizes=_PAPER.value,
                                        num_classes=_CLASSES.value)}
    print(json.dumps(result), flush=True)
    rows.append(result)
  print(tables.comm_volume(rows) + "\n\n" + tables.comm_volume_algorithms(rows))
  benchmarks.publish(rows, _OUTPUT.path("comm_volume.json"))


if __name__ == "__main__":
  app.run(main)
