r"""Test accuracy vs step on digits for model averaging periods and A-SGD n_sync values.

  python -m benchmarks.papers.local_sgd_convergence [--out=docs] [--model=alexnet_tiny]

Every run: 4 replicas (mesh 4 × 1), global batch 64 (16 per replica), the same data order and
initialisation, `--epochs` epochs, test accuracy after every epoch. Runs:
  data (synchronous SGD, the reference);
  averaging with sync_every ∈ --periods (allreduce, momentum averaged);
  asgd with n_push = n_fetch = n_sync ∈ --n_syncs, staggered. Each A-SGD client uses the learning
  rate of the synchronous run divided by 4, so that with n_sync = 1 the server's update equals the
  synchronous one (A-SGD adds the clients' updates; see hybrid_parallel/local_sgd/asgd.py); for
  n_sync > 1 a second run uses a quarter of that rate.
Writes local_sgd_convergence.json (docs/schemes.md's table is made from it) and .png to --out
and prints one JSON object per run.
"""

import json
import os
import tempfile

from absl import app, flags, logging

import benchmarks
from benchmarks.papers import tables
from hybrid_parallel import platforms

_OUT = flags.DEFINE_string("out", benchmarks.DOCS, "Output directory.")
_MODEL = flags.DEFINE_string("model", "alexnet_tiny", "Model name.")
_EPOCHS = flags.DEFINE_integer("epochs", 16, "Epochs per run.")
_PERIODS = flags.DEFINE_list("periods", ["1", "4", "16"], "Averaging periods (sync_every).")
_NSYNCS = flags.DEFINE_list("n_syncs", ["1", "4", "16"], "A-SGD n_sync values.")
REPLICAS = 4
BATCH = 64


def runs():
  yield "data (synchronous)", {"parallelism": "data"}
  for period in map(int, _PERIODS.value):
    yield f"averaging, sync_every={period}", {"parallelism": "averaging", "sync_every": period}
  for n_sync in map(int, _NSYNCS.value):
    for lr_factor in (1.0, 0.25) if n_sync > 1 else (1.0,):
      label = f"asgd, n_sync={n_sync}" + (", lr/4" if lr_factor != 1 else "")
      yield label, {"parallelism": "asgd", "n_push": n_sync, "n_fetch": n_sync,
                    "asgd_stagger": True, "lr_factor": lr_factor}


def main(argv):
  del argv
  platforms.start(cpu_devices=REPLICAS)
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  import train
  from configs import default

  logging.set_verbosity(logging.WARNING)
  steps_per_epoch = 1437 // BATCH
  results = []
  for label, overrides in runs():
    settings = dict(overrides)
    lr_factor = settings.pop("lr_factor", 1.0)
    config = default.for_scheme("data", REPLICAS, 1, global_batch_size=BATCH)
    config.update(model=_MODEL.value, num_epochs=_EPOCHS.value, base_learning_rate=0.1,
                  lr_decay_epochs=(round(_EPOCHS.value * 0.6),), eval_every_steps=steps_per_epoch,
                  log_every_steps=steps_per_epoch, **settings)
    if config.parallelism == "asgd":
      config.base_learning_rate *= lr_factor / REPLICAS
    with tempfile.TemporaryDirectory() as workdir:
      train.train_config(config, workdir)
      with open(os.path.join(workdir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    curve = [(r["step"], r["eval_top1"]) for r in rows if "eval_top1" in r]
    results.append({"run": label, **overrides, "steps": [s for s, _ in curve],
                    "eval_top1": [round(a, 4) for _, a in curve]})
    print(json.dumps({"run": label, "final_eval_top1": curve[-1][1]}), flush=True)

  print(tables.local_sgd_convergence(results))
  benchmarks.publish(results, os.path.join(_OUT.value, "local_sgd_convergence.json"))
  fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
  for ax, family in zip(axes, ("averaging", "asgd")):
    for r in results:
      if r["parallelism"] in (family, "data"):
        style = {"color": "black", "linestyle": "--"} if r["parallelism"] == "data" else {}
        ax.plot(r["steps"], r["eval_top1"], label=r["run"], **style)
    ax.set_title({"averaging": "model averaging (Su et al.)", "asgd": "A-SGD (Paine et al.)"}
                 [family])
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.legend()
  axes[0].set_ylabel("test top-1 on digits")
  fig.suptitle(f"{_MODEL.value}, 4 replicas × 16 images")
  fig.tight_layout()
  fig.savefig(os.path.join(_OUT.value, "local_sgd_convergence.png"), dpi=110)


if __name__ == "__main__":
  app.run(main)
