r"""Accuracy vs global batch for each large-batch rule, at equal epochs (Goyal et al.'s question).

  python benchmarks/large_batch.py [--out=docs] [--batches=32,64,...] [--rules=none,linear,...]

Every run starts from configs/large_batch.py (AlexNet-BN at tiny width on digits, reference batch
32, 30 epochs, cosine decay, one device) and changes only the global batch and the rule:

  none             the reference learning rate η at every batch size;
  linear           η × k for k = batch / 32 (Goyal et al.'s linear scaling rule), from step 0;
  linear+warmup    the same, reached by a gradual warmup from η over 5 epochs;
  lars             LARS (You et al. 2017) with linear scaling + warmup, at its own η (--lars_lr).

Writes large_batch.csv (one row per run), large_batch.json (with the loss curves),
large_batch.md (a table) and two PNGs — final test accuracy vs batch per rule, and the training
loss vs epoch at the largest batch (as Goyal et al.'s figures) — to --out, and prints one JSON
object per run as it finishes.
"""

import csv
import json
import os
import sys
import tempfile
import time

from absl import app, flags, logging

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

_OUT = flags.DEFINE_string("out", "docs", "Output directory.")
_BATCHES = flags.DEFINE_list("batches", ["32", "64", "128", "256", "512", "1024"],
                             "Global batch sizes.")
_RULES = flags.DEFINE_list("rules", ["none", "linear", "linear+warmup", "lars"], "Rules.")
_LARS_LR = flags.DEFINE_float("lars_lr", 0.1, "LARS's η at the reference batch.")
_EPOCHS = flags.DEFINE_integer("epochs", 30, "Epochs per run (equal for every batch).")

RULES = {
    "none": dict(lr_scaling="none", warmup_epochs=0),
    "linear": dict(lr_scaling="linear", warmup_epochs=0),
    "linear+warmup": dict(lr_scaling="linear", warmup_epochs=5, warmup="gradual"),
    "lars": dict(optimizer="lars", lr_scaling="linear", warmup_epochs=5, warmup="gradual"),
}


def run(config, train) -> dict:
  """Trains `config`; returns its final eval metrics and its training-loss curve per log row."""
  with tempfile.TemporaryDirectory() as workdir:
    start = time.perf_counter()
    final = train.train_and_evaluate(config, workdir)
    seconds = time.perf_counter() - start
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      rows = [json.loads(line) for line in f]
  curve = [(r["step"], r["train_loss"]) for r in rows if "train_loss" in r]
  return {"eval_top1": round(final["eval_top1"], 4), "eval_loss": round(final["eval_loss"], 4),
          "seconds": round(seconds, 1), "loss_steps": [s for s, _ in curve],
          "train_loss": [round(v, 4) for _, v in curve]}


def write_outputs(results, out: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  os.makedirs(out, exist_ok=True)
  with open(os.path.join(out, "large_batch.json"), "w") as f:
    json.dump(results, f, indent=1)
  columns = ["rule", "global_batch", "steps", "peak_lr", "eval_top1", "eval_loss", "seconds"]
  with open(os.path.join(out, "large_batch.csv"), "w", newline="") as f:
    writer = csv.DictWriter(f, columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(results)
  rules = list(dict.fromkeys(r["rule"] for r in results))
  batches = sorted({r["global_batch"] for r in results})
  top1 = {(r["rule"], r["global_batch"]): r["eval_top1"] for r in results}
  lines = ["| global batch | " + " | ".join(rules) + " |", "|---" * (len(rules) + 1) + "|"]
  lines += [f"| {b} | " + " | ".join(f"{100 * top1[r, b]:.2f}%" if (r, b) in top1 else "—"
                                     for r in rules) + " |" for b in batches]
  with open(os.path.join(out, "large_batch.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
  print("\n".join(lines))

  fig, ax = plt.subplots(figsize=(6, 4))
  for rule in rules:
    points = [(b, top1[rule, b]) for b in batches if (rule, b) in top1]
    ax.plot([b for b, _ in points], [100 * a for _, a in points], marker="o", label=rule)
  ax.set_xscale("log", base=2)
  ax.set_xlabel("global batch")
  ax.set_ylabel("test top-1 (%)")
  ax.set_title("digits, alexnet_bn_tiny, equal epochs")
  ax.grid(alpha=0.3)
  ax.legend()
  fig.tight_layout()
  fig.savefig(os.path.join(out, "large_batch_accuracy.png"), dpi=110)

  fig, ax = plt.subplots(figsize=(6, 4))
  for batch, style in ((batches[0], "--"), (batches[-1], "-")):
    for i, rule in enumerate(rules):
      r = next((r for r in results if r["rule"] == rule and r["global_batch"] == batch), None)
      if r:
        epochs = [s / r["steps_per_epoch"] for s in r["loss_steps"]]
        ax.plot(epochs, r["train_loss"], style, color=f"C{i}", label=f"{rule}, batch {batch}")
  ax.set_xlabel("epoch")
  ax.set_ylabel("training loss")
  ax.set_yscale("log")
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(os.path.join(out, "large_batch_loss.png"), dpi=110)


def main(argv):
  del argv
  import input_pipeline
  import train
  from configs import large_batch
  from hybrid_parallel import optim

  logging.set_verbosity(logging.WARNING)
  for rule in _RULES.value:
    if rule not in RULES:
      raise SystemExit(f"error: unknown rule {rule!r}; choose from {', '.join(RULES)}.")
  train_examples = None
  results = []
  for batch in map(int, _BATCHES.value):
    for rule in _RULES.value:
      config = large_batch.get_config()
      config.update(global_batch_size=batch, num_epochs=_EPOCHS.value, **RULES[rule])
      if rule == "lars":
        config.base_learning_rate = _LARS_LR.value
      if train_examples is None:
        train_examples = len(input_pipeline.load(config).x_train)
      steps_per_epoch = train_examples // batch
      config.log_every_steps = steps_per_epoch  # one loss point per epoch.
      peak = optim.peak_learning_rate(config.base_learning_rate, batch,
                                      config.reference_batch_size, config.lr_scaling)
      result = {"rule": rule, "global_batch": batch, "steps_per_epoch": steps_per_epoch,
                "steps": steps_per_epoch * config.num_epochs, "peak_lr": round(peak, 4),
                **run(config, train)}
      results.append(result)
      print(json.dumps({k: v for k, v in result.items()
                        if k not in ("loss_steps", "train_loss")}), flush=True)
  write_outputs(results, _OUT.value)


if __name__ == "__main__":
  app.run(main)
