r"""Yadan et al.'s Table 1 (plus owt8) on this machine: each config trained end to end by main.py.

  python benchmarks/table1.py [--configs=single,model2,...] [--out=runs/table1]

For every config: wall-clock seconds of the whole `python main.py --config=configs/NAME.py` run,
its final test top-1 / top-5, its median training images/s, and the mesh. Prints one JSON object
per config as it finishes, then a Markdown table; writes both to --out.

Wall-clock on a CPU host with simulated devices measures the machinery, not the scheme's merit on
real accelerators (all simulated devices share the host's cores).
"""

import json
import os
import statistics
import subprocess
import sys
import time

from absl import app, flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CONFIGS = flags.DEFINE_list("configs", ["single", "model2", "data2", "data4", "hybrid4", "owt8"],
                             "Config names under configs/.")
_OUT = flags.DEFINE_string("out", "runs/table1", "Directory for workdirs and results.")


def run_config(name: str, out: str) -> dict:
  workdir = os.path.join(out, name)
  if os.path.exists(os.path.join(workdir, "metrics.jsonl")):
    os.remove(os.path.join(workdir, "metrics.jsonl"))  # metrics.jsonl appends; start clean.
  start = time.perf_counter()
  result = subprocess.run([sys.executable, os.path.join(ROOT, "main.py"),
                           f"--config={os.path.join(ROOT, 'configs', name + '.py')}",
                           f"--workdir={workdir}"], capture_output=True, text=True)
  seconds = time.perf_counter() - start
  if result.returncode != 0:
    raise SystemExit(f"error: {name} failed:\n{result.stderr[-3000:]}")
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  last_eval = [r for r in rows if "eval_top1" in r][-1]
  rates = [r["images_per_sec"] for r in rows if "images_per_sec" in r][1:]  # skip compile.
  return {"config": name, "wall_clock_s": round(seconds, 1), "steps": last_eval["step"],
          "eval_top1": round(last_eval["eval_top1"], 4),
          "eval_top5": round(last_eval["eval_top5"], 4),
          "train_images_per_sec_median": round(statistics.median(rates), 1) if rates else None}


def main(argv):
  del argv
  os.makedirs(_OUT.value, exist_ok=True)
  results = []
  for name in _CONFIGS.value:
    results.append(run_config(name, _OUT.value))
    print(json.dumps(results[-1]), flush=True)
  lines = ["| config | steps | wall-clock (s) | train img/s (median) | test top-1 | test top-5 |",
           "|---|---|---|---|---|---|"]
  lines += [f"| {r['config']} | {r['steps']} | {r['wall_clock_s']} | "
            f"{r['train_images_per_sec_median']} | {100 * r['eval_top1']:.2f}% | "
            f"{100 * r['eval_top5']:.2f}% |" for r in results]
  print("\n".join(lines))
  with open(os.path.join(_OUT.value, "table1.json"), "w") as f:
    json.dump(results, f, indent=1)
  with open(os.path.join(_OUT.value, "table1.md"), "w") as f:
    f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
  app.run(main)
