r"""Krizhevsky 2014's owt schemes on digits at equal epochs: (a) against (b) with an FC update per
pass (the variable batch size), each on several seeds.

  python -m benchmarks.papers.owt_variants [--runs=a,b_per_pass,b_variable] [--seeds=0,1,2]
                                           [--out=DIR | --publish]
  python -m benchmarks.papers.owt_variants --model=alexnet_owt_tiny   # the same in minutes

Every run is `python main.py --config=configs/owt8.py` (2×4 mesh, 8 simulated devices, batch
1024, 250 steps = 250 epochs of digits) from scratch, once per seed (the seed sets the
initialisation, the data order and dropout), evaluated every --eval_every_steps steps:

  a                        owt8 as it is: scheme (a), one update per step, every layer at
                           owt8's rate;
  b_per_pass               the same rates, scheme (b) with an FC update after each of the 4
                           passes (conv batch 1024, FC batch 256);
  b_variable               configs/owt8_variable.py: (b), an FC update per pass at a quarter of
                           the rate (its docstring says why).

--model trains another network than the configs' alexnet_owt (its `_tiny` variant: the same
settings, ~40 s a run instead of ~10 minutes on a 2-core CPU).

Writes owt_variants.json — one row per run and model: per-seed lists (`seeds`, `eval_top1`,
`eval_top5`, the lowest test top-1 after first reaching LEARNED, wall-clock, the test top-1 and
training-loss curves) and their mean and spread — and owt_variants.png (every seed's curves
against epochs) under runs/owt_variants/ (or --out; with --publish into docs/, which
docs/schemes.md's table is made from). Each run's progress lines (compile, step, loss, ETA)
stream as it trains. A stopped study resumes from the JSON in its output folder: a run's seeds
already there are not trained again (rows are known
by run and model, so after a change to a run's config, delete its row to measure it again).
"""

import os

from absl import app, flags

import benchmarks
from benchmarks.common import main_runs
from benchmarks.papers import tables

# A run "has learned" once its test top-1 reaches this; the lowest top-1 after that shows whether
# it fell back towards chance (10%) — the collapse these configs once showed.
LEARNED = 0.5
_PER_PASS = ("--config.owt_variant=b", "--config.fc_updates_per_step=4")

# Run name → (config under configs/, its overrides).
RUNS = {
    "a": ("owt8", ()),
    "b_per_pass": ("owt8", _PER_PASS),
    "b_variable": ("owt8_variable", ()),
}

_RUNS = benchmarks.define_choices("runs", RUNS, "Which runs (module docstring).")
_SEEDS = benchmarks.define_seeds_flag()
_MODEL = flags.DEFINE_enum("model", None, ["alexnet_owt", "alexnet_owt_tiny"],
                           "The network, if not the configs' own (alexnet_owt).")
_EVAL_EVERY = flags.DEFINE_integer("eval_every_steps", 10, "Evaluate every this many steps.")
_WORKDIRS = flags.DEFINE_string("workdirs", os.path.join(main_runs.ROOT, "runs", "owt_variants"),
                                "Where each run's workdir goes (emptied first).")
_OUTPUT = benchmarks.define_output_flags("owt_variants")


def run(name: str, *, seed: int, model: str | None, eval_every_steps: int,
        workdirs: str) -> dict:
  """Trains run `name` on `seed` by main.py; the row of its setting (without its results) and
  the results of this seed."""
  config, overrides = RUNS[name]
  settings = overrides + ((f"--config.model={model}",) if model else ())
  logging = (f"--config.eval_every_steps={eval_every_steps}", "--config.log_every_steps=5",
             f"--config.seed={seed}")
  run_name = f"{name}_{model or 'default'}_{seed}"
  result = main_runs.run_config(config, workdirs, overrides=settings + logging,
                                run_name=run_name)
  rows = main_runs.metrics_rows(os.path.join(workdirs, run_name))
  curve = [[r["step"], round(r["eval_top1"], 4)] for r in rows if "eval_top1" in r]
  learned = [i for i, (_, top1) in enumerate(curve) if top1 >= LEARNED]
  setting = {"run": name, "config": config, "overrides": list(settings),
             "model": model or result["model"],
             **{k: result[k] for k in ("mesh", "scheme", "global_batch", "steps")}}
  return setting, {
      "eval_top1": result["eval_top1"], "eval_top5": result["eval_top5"],
      "lowest_top1_after_learning": min(top1 for _, top1 in curve[learned[0]:])
                                    if learned else None,
      "wall_clock_s": result["wall_clock_s"], "eval_top1_curve": curve,
      "train_loss_curve": [[r["step"], round(r["train_loss"], 4)] for r in rows
                           if "train_loss" in r]}


def plot(results: list[dict], path: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt
  figure, (top1, loss) = plt.subplots(1, 2, figsize=(11, 4))
  for r in results:  # a colour per run, a line style per model, one line per seed.
    style = dict(color=f"C{list(RUNS).index(r['run'])}", alpha=0.7,
                 linestyle="--" if r["model"].endswith("_tiny") else "-")
    for k, (top1_curve, loss_curve) in enumerate(zip(r["eval_top1_curve"],
                                                     r["train_loss_curve"])):
      label = f"{r['run']} ({r['model']})" if k == 0 else None
      top1.plot(*zip(*top1_curve), label=label, **style)
      loss.plot(*zip(*loss_curve), label=label, **style)
  top1.set(xlabel="epoch (= step)", ylabel="test top-1", title="owt8 on digits, every seed")
  loss.set(xlabel="epoch (= step)", ylabel="training loss", yscale="log")
  top1.legend(fontsize=8)
  figure.tight_layout()
  figure.savefig(path, dpi=100)


def main(argv):
  del argv
  path = _OUTPUT.path("owt_variants.json")
  results = benchmarks.load_if_present(path)
  model = _MODEL.value or "alexnet_owt"
  for name in _RUNS.value:
    for seed in map(int, _SEEDS.value):
      row = next((r for r in results if (r["run"], r["model"]) == (name, model)), None)
      if row and seed in row["seeds"]:
        continue  # resumed: this seed is in the JSON already.
      setting, result = run(name, seed=seed, model=_MODEL.value,
                            eval_every_steps=_EVAL_EVERY.value, workdirs=_WORKDIRS.value)
      if row is None:
        row = setting
        results.append(row)
      benchmarks.add_seed(row, seed, result)
      print({"run": name, "model": model, "seed": seed,
             **{k: v for k, v in result.items() if not k.endswith("_curve")}}, flush=True)
      # Written after every seed: a stopped benchmark keeps what it finished.
      results.sort(key=lambda r: (r["model"], list(RUNS).index(r["run"])))
      plot(results, _OUTPUT.path("owt_variants.png"))
      benchmarks.publish(results, path)
  print(tables.owt_variants(results))


if __name__ == "__main__":
  app.run(main)
