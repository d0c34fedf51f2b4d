r"""Yadan et al.'s Table 1 (plus owt8) on this machine: each config trained end to end by main.py.

  python -m benchmarks.table1 [--configs=single,model2,...] [--out=docs/table1.json]

For every config: wall-clock seconds of the whole `python main.py --config=configs/NAME.py` run
(from scratch), its final test top-1 / top-5, its median training images/s, and the mesh. Prints
one JSON object per config as it finishes, then a Markdown table; writes the JSON to --out (the
README's table is made from docs/table1.json), keeping the rows of configs not run this time.

Wall-clock on a CPU host with simulated devices measures the machinery, not the scheme's merit on
real accelerators (all simulated devices share the host's cores).
"""

import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from absl import app, flags

from benchmarks import tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CONFIGS = flags.DEFINE_list("configs", ["single", "model2", "data2", "data4", "hybrid4", "owt8",
                                         "averaging4"], "Config names under configs/.")
_WORKDIRS = flags.DEFINE_string("workdirs", os.path.join(ROOT, "runs", "table1"),
                                "Where each config's workdir goes (emptied first).")
_OUT = flags.DEFINE_string("out", os.path.join(tables.DOCS, "table1.json"), "The results' JSON.")


def run_config(name: str, workdirs: str) -> dict:
  """Trains configs/NAME.py with main.py from scratch; its wall-clock and final metrics."""
  workdir = os.path.join(workdirs, name)
  shutil.rmtree(workdir, ignore_errors=True)  # a workdir with checkpoints would resume.
  start = time.perf_counter()
  result = subprocess.run([sys.executable, os.path.join(ROOT, "main.py"),
                           f"--config={os.path.join(ROOT, 'configs', name + '.py')}",
                           f"--workdir={workdir}"], capture_output=True, text=True, cwd=ROOT)
  seconds = time.perf_counter() - start
  if result.returncode != 0:
    raise SystemExit(f"error: {name} failed:\n{result.stderr[-3000:]}")
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  last_eval = [r for r in rows if "eval_top1" in r][-1]
  rates = [r["images_per_sec"] for r in rows if "images_per_sec" in r][1:]  # skip compile.
  config = importlib.import_module(f"configs.{name}").get_config()
  return {"config": name, "mesh": f"{config.mesh.data}×{config.mesh.model}",
          "scheme": config.parallelism, "model": config.model,
          "global_batch": config.global_batch_size, "wall_clock_s": round(seconds, 1),
          "steps": last_eval["step"], "eval_top1": round(last_eval["eval_top1"], 4),
          "eval_top5": round(last_eval["eval_top5"], 4),
          "train_images_per_sec_median": round(statistics.median(rates), 1) if rates else None}


def main(argv):
  del argv
  # Rows of configs not run now are kept from --out: one config can be measured again alone.
  previous = []
  if os.path.exists(_OUT.value):
    with open(_OUT.value) as f:
      previous = [r for r in json.load(f) if r["config"] not in _CONFIGS.value]
  results = []
  for name in _CONFIGS.value:
    results.append(run_config(name, _WORKDIRS.value))
    print(json.dumps(results[-1]), flush=True)
  order = {name: i for i, name in enumerate(_CONFIGS.default)}
  results = sorted(previous + results, key=lambda r: order.get(r["config"], len(order)))
  print(tables.table1(results))
  tables.publish(results, _OUT.value)


if __name__ == "__main__":
  app.run(main)
