r"""Yadan et al.'s Table 1 (and averaging4) on this machine: each config trained end to end by
main.py. owt8, at its own budget (250 epochs), is trained on several seeds by owt_variants.py.

  python -m benchmarks.papers.table1 [--configs=single,model2,...] [--out=DIR | --publish]

For every config: wall-clock seconds of the whole `python main.py --config=configs/NAME.py` run
(from scratch), its final test top-1 / top-5, its median training images/s, and the mesh. Streams
each run's progress lines (compile, step, loss, ETA), prints one JSON object per config as it
finishes, then a Markdown table; writes table1.json under runs/table1/ (or --out; with --publish
into docs/, which docs/schemes.md's table is made from), keeping the rows of configs not run this
time.

Wall-clock on a CPU host with simulated devices measures the machinery, not the scheme's merit on
real accelerators (all simulated devices share the host's cores).
"""

import json
import os

from absl import app, flags

import benchmarks
from benchmarks.common import main_runs
from benchmarks.papers import tables

ROOT = main_runs.ROOT
_CONFIGS = flags.DEFINE_list("configs", ["single", "model2", "data2", "data4", "hybrid4",
                                         "averaging4"], "Config names under configs/.")
_WORKDIRS = flags.DEFINE_string("workdirs", os.path.join(ROOT, "runs", "table1"),
                                "Where each config's workdir goes (emptied first).")
_OUTPUT = benchmarks.define_output_flags("table1")


def main(argv):
  del argv
  # Rows of configs not run now are kept: one config can be measured again alone.
  path = _OUTPUT.path("table1.json")
  previous = [r for r in benchmarks.load_if_present(path)
              if r["config"] not in _CONFIGS.value]
  results = []
  for name in _CONFIGS.value:
    results.append(main_runs.run_config(name, _WORKDIRS.value))
    print(json.dumps(results[-1]), flush=True)
  order = {name: i for i, name in enumerate(_CONFIGS.default)}
  results = sorted(previous + results, key=lambda r: order.get(r["config"], len(order)))
  print(tables.table1(results))
  benchmarks.publish(results, path)


if __name__ == "__main__":
  app.run(main)
