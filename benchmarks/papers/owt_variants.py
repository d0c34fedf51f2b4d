r"""Krizhevsky 2014's owt schemes on digits at equal epochs: (a) against (b) with an FC update per
pass (the variable batch size), at owt8's rates and at Krizhevsky's per-layer rates.

  python -m benchmarks.papers.owt_variants [--runs=a,b_per_pass,b_variable]

Every run is `python main.py --config=configs/owt8.py` (2×4 mesh, 8 simulated devices, batch
1024, 250 steps = 250 epochs of digits) from scratch, evaluated every --eval_every_steps steps:

  a                        owt8 as it is: scheme (a), one update per step, every layer at
                           0.01 × √8 after a 10-epoch warmup;
  b_per_pass               the same rates, scheme (b) with an FC update after each of the 4
                           passes (conv batch 1024, FC batch 256);
  b_variable               configs/owt8_variable.py: (b), an FC update per pass, the conv
                           layers at 0.02 and the FC layers at 0.0035 per pass (its
                           docstring says why these rates).

Writes owt_variants.json (final test top-1/top-5, wall-clock, the test top-1 and training-loss
curves) and owt_variants.png (both curves against epochs) to --out; docs/schemes.md's table is
made from the JSON. About 12 minutes per run on a 2-core CPU.
"""

import os

from absl import app, flags

import benchmarks
from benchmarks.common import main_runs
from benchmarks.papers import tables

_PER_PASS = ("--config.owt_variant=b", "--config.fc_updates_per_step=4")

# Run name → (config under configs/, its overrides).
RUNS = {
    "a": ("owt8", ()),
    "b_per_pass": ("owt8", _PER_PASS),
    "b_variable": ("owt8_variable", ()),
}

_RUNS = flags.DEFINE_list("runs", list(RUNS), "Which runs (module docstring).")
flags.register_validator("runs", lambda runs: set(runs) <= set(RUNS),
                         message=f"--runs: choose from {', '.join(RUNS)}.")
_EVAL_EVERY = flags.DEFINE_integer("eval_every_steps", 10, "Evaluate every this many steps.")
_WORKDIRS = flags.DEFINE_string("workdirs", os.path.join(main_runs.ROOT, "runs", "owt_variants"),
                                "Where each run's workdir goes (emptied first).")
_OUT = flags.DEFINE_string("out", benchmarks.DOCS, "Output directory.")


def run(name: str, *, eval_every_steps: int, workdirs: str) -> dict:
  config, overrides = RUNS[name]
  logging = (f"--config.eval_every_steps={eval_every_steps}", "--config.log_every_steps=5")
  result = main_runs.run_config(config, workdirs, overrides=overrides + logging, run_name=name)
  rows = main_runs.metrics_rows(os.path.join(workdirs, name))
  result.update(run=name, overrides=list(overrides),
                eval_top1_curve=[[r["step"], round(r["eval_top1"], 4)] for r in rows
                                 if "eval_top1" in r],
                train_loss_curve=[[r["step"], round(r["train_loss"], 4)] for r in rows
                                  if "train_loss" in r])
  return result


def plot(results: list[dict], path: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt
  figure, (top1, loss) = plt.subplots(1, 2, figsize=(11, 4))
  for r in results:
    top1.plot(*zip(*r["eval_top1_curve"]), label=r["run"])
    loss.plot(*zip(*r["train_loss_curve"]), label=r["run"])
  top1.set(xlabel="epoch (= step)", ylabel="test top-1", title="owt8 on digits")
  loss.set(xlabel="epoch (= step)", ylabel="training loss", yscale="log")
  top1.legend()
  figure.tight_layout()
  figure.savefig(path, dpi=100)


def main(argv):
  del argv
  path = os.path.join(_OUT.value, "owt_variants.json")
  # Runs not made now are kept from the previous file: one run can be measured again alone.
  previous = [r for r in benchmarks.load_if_present(path) if r["run"] not in _RUNS.value]
  results = previous
  for name in _RUNS.value:
    results.append(run(name, eval_every_steps=_EVAL_EVERY.value, workdirs=_WORKDIRS.value))
    print({k: v for k, v in results[-1].items() if not k.endswith("_curve")}, flush=True)
    # Written after every run: a stopped benchmark keeps what it finished.
    results.sort(key=lambda r: list(RUNS).index(r["run"]))
    plot(results, os.path.join(_OUT.value, "owt_variants.png"))
    benchmarks.publish(results, path)
  print(tables.owt_variants(results))


if __name__ == "__main__":
  app.run(main)
