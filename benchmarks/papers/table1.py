r"""Every config in configs/ trained end to end by main.py, as a user runs it: what each gives.

  python -m benchmarks.papers.table1 [--configs=single,model2,...] [--out=DIR | --publish]

For every config whose data is held in memory (digits, synthetic: nothing to fetch), the
wall-clock seconds of the whole `python main.py --config=configs/NAME.py` run from scratch, its
final test top-1 / top-5, its median training images/s and its mesh. A config whose data cannot be
fetched here (ImageNet: its archives need an account) is not trained: its row says so and gives
the result published for its recipe (the config's `PUBLISHED_RESULT`); nor is one whose config
says why a CPU cannot train it end to end (`NOT_RUN_HERE`). Streams each run's
progress lines (compile, step, loss, ETA), prints one JSON object per config as it finishes, then
a Markdown table; writes table1.json under runs/table1/ (or --out, keeping the rows of configs not
run this time; with --publish into docs/, which docs/configs.md's and docs/schemes.md's tables are
made from).

--publish runs every config, one after the other in this one run, so that every row of the
published table comes from one machine: on a CPU, a machine doing nothing else, since the wall
times are what a user reads (`--shared_machine` records that other work ran beside it).
`--num_train_steps=N` trains each config N steps only: a quick check of the study itself.

Wall-clock on a CPU host with simulated devices measures the machinery, not the scheme's merit on
real accelerators (all simulated devices share the host's cores).
"""

import json
import os

from absl import app, flags

import benchmarks
import configs
from benchmarks.common import main_runs
from benchmarks.papers import tables
from input_pipeline import arrays

ROOT = main_runs.ROOT
# The table's order: Yadan et al.'s Table 1, one weird trick, the asynchronous schemes, the large
# batch, ImageNet; a config not named here (a new one) follows, by name.
ORDER = ("single", "model2", "data2", "data4", "hybrid4", "owt8", "owt8_variable", "averaging4",
         "asgd8", "large_batch", "large_batch_alexnet", "large_batch_resnet", "resnet50_cifar",
         "imagenet_single", "imagenet_owt8")
_CONFIGS = flags.DEFINE_list("configs", None, "Config names under configs/ (default: all).")
_STEPS = flags.DEFINE_integer("num_train_steps", None, "Train each config this many steps only: "
                              "a quick check of the study (not with --publish).")
_SHARED = flags.DEFINE_bool("shared_machine", False, "Other work ran on this machine beside the "
                            "study: the record says so (its wall times are disturbed).")
_WORKDIRS = flags.DEFINE_string("workdirs", os.path.join(ROOT, "runs", "table1"),
                                "Where each config's workdir goes (emptied first).")
_OUTPUT = benchmarks.define_output_flags("table1")


def every_config() -> list[str]:
  """configs/'s experiment configs in the table's order."""
  names = configs.names()
  return [n for n in ORDER if n in names] + sorted(set(names) - set(ORDER))


def described(name: str) -> dict:
  """What configs/NAME.py trains, as its row says it: the scheme (owt with its variant), the mesh
  and, in a few words, the network, data, batch and length ("alexnet, digits at 64², batch 256,
  30 epochs"; the data of a config not trained here as its PUBLISHED_RESULT names it)."""
  config = configs.get(name)
  published = configs.published_result(name)
  data = published["dataset"] if published else config.dataset
  length = (f"{config.num_train_steps} steps" if config.num_train_steps > 0
            else f"{config.num_epochs:g} epochs")
  variant = f" ({config.owt_variant})" if config.parallelism == "owt" else ""
  return {"scheme": config.parallelism + variant, "mesh": f"{config.mesh.data}×{config.mesh.model}",
          "trains": f"{config.model}, {data} at {config.image_size}², batch "
                    f"{config.global_batch_size}, {length}"}


def is_trained_here(name: str) -> bool:
  """Whether the study trains configs/NAME.py: its data is held in memory, nothing fetched, and
  it does not say that a CPU cannot train it (`NOT_RUN_HERE`)."""
  return arrays.is_array_dataset(configs.get(name).dataset) and not configs.not_run_here(name)


def not_run_row(name: str) -> dict:
  """The row of a config this study does not train: what it trains, why not, and the published
  result its recipe expects (its `PUBLISHED_RESULT`, where it has one)."""
  config = configs.get(name)
  return {"config": name, "model": config.model, "global_batch": config.global_batch_size,
          **described(name),
          "not_run": (configs.not_run_here(name) or
                      f"its data ({config.dataset}) is prepared by hand"),
          "published": configs.published_result(name)}


def check(names: list[str]) -> None:
  """One sentence, before any training, for what this study cannot do."""
  unknown = sorted(set(names) - set(configs.names()))
  if unknown:
    raise SystemExit(f"error: --configs names {', '.join(unknown)}, not in configs/; choose of "
                     f"{', '.join(every_config())}.")
  if _OUTPUT.publishing and (sorted(names) != sorted(configs.names()) or _STEPS.value):
    raise SystemExit("error: --publish writes the table of every config, measured in one run "
                     "on one machine: leave out --configs and --num_train_steps (or write this "
                     "subset with --out=DIR).")
  undeclared = [n for n in names if not arrays.is_array_dataset(configs.get(n).dataset)
                and not configs.published_result(n) and not configs.not_run_here(n)]
  if undeclared:
    raise SystemExit(f"error: configs/{undeclared[0]}.py trains on "
                     f"{configs.get(undeclared[0]).dataset}, which this study cannot fetch, and "
                     f"declares neither PUBLISHED_RESULT (dataset, top1, source) nor NOT_RUN_HERE "
                     f"for its row.")


def machine() -> str:
  """The record's machine: this one, and on a CPU the simulated devices each mesh ran on."""
  found = benchmarks.this_machine()
  if "×" not in found:  # no accelerator: main.py simulates each mesh's devices.
    found += ", each mesh on simulated CPU devices"
  return found + (", shared with other work (wall times disturbed)" if _SHARED.value else "")


def main(argv):
  del argv
  names = _CONFIGS.value or every_config()
  check(names)
  # Rows of configs not run now are kept (not when publishing: every row from this one run).
  path = _OUTPUT.path("table1.json")
  previous = [] if _OUTPUT.publishing else [
      r for r in benchmarks.load_if_present(path) if r["config"] not in names]
  overrides = (f"--config.num_train_steps={_STEPS.value}",
               f"--config.eval_every_steps={_STEPS.value}") if _STEPS.value else ()
  where = machine()  # before the runs: a failed query costs no training.
  results = []
  for name in names:
    if is_trained_here(name):
      row = {**main_runs.run_config(name, _WORKDIRS.value, overrides=overrides),
             **described(name)}
      if _STEPS.value:
        row["trains"] += f" (stopped at {_STEPS.value} steps)"
    else:
      row = not_run_row(name)
    results.append(row)
    print(json.dumps(results[-1]), flush=True)
  order = {name: i for i, name in enumerate(every_config())}
  results = sorted(previous + results, key=lambda r: order.get(r["config"], len(order)))
  print(tables.table1(results))
  benchmarks.publish(results, path, machine=where)


if __name__ == "__main__":
  app.run(main)
