r"""The docs' tables, rendered from the JSON the benchmarks wrote: never copied by hand.

  python -m benchmarks.tables            # rewrite every table block in docs/*.md and README.md
  python -m benchmarks.tables --check    # exit 1 if a block differs from its JSON

A page includes a table as a block

  <!-- table: NAME -->
  ...
  <!-- end table -->

whose body is `render(NAME)`: the function of that name below applied to the JSON file(s) of
`SOURCES[NAME]` in docs/. Each benchmark refreshes the blocks after writing its JSON, and
tests/docs_test.py fails when a block and its JSON disagree.
"""

import json
import os
import re
import sys
from collections.abc import Callable

from benchmarks import accelerator_tables
from benchmarks.markdown import mb, per_row, percent, spread, table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")


def without_machine_paths(value):
  """`value` (a report) with the paths of the machine it ran on taken out of its tracebacks:
  files of this repository relative to its root, installed packages from `site-packages/` on
  (the report goes into docs/)."""
  if isinstance(value, dict):
    return {k: without_machine_paths(v) for k, v in value.items()}
  if isinstance(value, list):
    return [without_machine_paths(v) for v in value]
  if isinstance(value, str):
    return re.sub(r"/[^\s\"']*/site-packages/", "site-packages/",
                  value.replace(ROOT + os.sep, ""))
  return value


_BLOCK = re.compile(r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end table -->)",
                    re.DOTALL)


_MESH = ("mesh", "{mesh[0]}×{mesh[1]}")


def throughput(rows) -> str:
  """Every config under every backend; time per image relative to `single` on the same backend."""
  single = {r["backend"]: r["step_time_ms"]["median"] / r["global_batch"] for r in rows
            if r["config"] == "single"}
  return per_row(
      ("config", "{config}"), ("backend", "{backend}"), _MESH, ("batch", "{global_batch}"),
      ("images/s", "{images_per_sec}"), ("step ms (median, p10–p90)", spread("step_time_ms")),
      ("per image vs single",
       lambda r: f"{r['step_time_ms']['median'] / r['global_batch'] / single[r['backend']]:.2f}"),
      ("MFU", lambda r: f"{100 * r['mfu']:.1f}%"),
      ("busiest device MB/step", lambda r: mb(r["hlo_busiest_device_bytes"])),
      ("compile s", "{compile_s}"))(rows)


COMM_VOLUME_ALGORITHMS_CONFIG = "data4"  # benchmarks/comm_volume.py --all measures it with each.


def _sent(kind: str) -> Callable[[dict], str]:
  """The cell "MB (ops)" of one kind of collective in a comm_volume row."""
  return lambda r: (f"{mb(r['hlo'][kind]['bytes_per_device'])} ({r['hlo'][kind]['ops']})"
                    if kind in r["hlo"] else "—")


def _minimum(r) -> str:
  a = r["analytic_bytes_per_device"]
  return f"{mb(a['total'])} ({mb(a['gradients'])} + {mb(a['activations'])})"


# Bytes per device from the compiled HLO beside the analytic minimum (psum rows).
comm_volume = per_row(
    ("config", lambda r: r["config"] + (f" ({r['owt_variant']})"
                                        if r.get("owt_variant", "a") != "a" else "")),
    _MESH, ("batch", "{global_batch}"), ("all-reduce MB (ops)", _sent("all-reduce")),
    ("all-gather", _sent("all-gather")), ("reduce-scatter", _sent("reduce-scatter")),
    ("collective-permute", _sent("collective-permute")),
    ("HLO total MB", lambda r: mb(r["hlo_bytes_per_device"])),
    ("analytic minimum MB (gradients + activations)", _minimum),
    rows=lambda rows: [r for r in rows if r["grad_reduce"] == "psum"])

# data4's gradient all-reduce by each algorithm: mean and busiest device.
comm_volume_algorithms = per_row(
    ("`grad_reduce`", "`{grad_reduce}`"),
    ("HLO collectives", lambda r: ", ".join(f"{s['ops']} {kind}" for kind, s in r["hlo"].items())),
    ("mean MB sent per device", lambda r: mb(r["hlo_bytes_per_device"])),
    ("busiest device MB", lambda r: mb(r["hlo_busiest_device_bytes"])),
    rows=lambda rows: [r for r in rows if r["config"] == COMM_VOLUME_ALGORITHMS_CONFIG])


def scaling_model(result) -> str:
  """Predicted speed-up vs devices, by all-reduce algorithm."""
  points = result["speedup_vs_devices"]
  speedup = {(a, p["devices"]): p["speedup"] for a, ps in points.items() for p in ps}
  devices = sorted({n for _, n in speedup})
  return table(["devices", *(a.replace("_", " ") for a in points)],
                ([n, *(f"{speedup[a, n]:.1f}" if (a, n) in speedup else "—" for a in points)]
                 for n in devices))


# Yadan et al.'s Table 1 through the α-β model.
scaling_model_yadan = per_row(
    ("configuration", "{configuration}"), ("mesh", "{mesh}"),
    ("MB per device and step", "{mb_per_device}"), ("predicted days", "{predicted_days}"),
    ("paper days", "{paper_days}"), ("predicted speed-up", "{predicted_speedup}"),
    ("paper speed-up", "{paper_speedup}"),
    ("bandwidth the paper's days imply", lambda r: "—" if r["implied_gb_per_s"] is None
     else f"{r['implied_gb_per_s']} GB/s"),
    rows=lambda result: result["yadan_table1"])

# Krizhevsky 2014's owt schemes on 8 K20s through the α-β model.
scaling_model_owt = per_row(
    ("scheme", "({variant})"), ("FC updates per step", "{fc_updates_per_step}"),
    ("batches (conv, FC)", lambda r: r["batches (conv, FC)"]), ("predicted s per step", "{step_s}"),
    ("exposed communication s", "{exposed_communication_s}"),
    ("predicted speed-up", "{predicted_speedup}"),
    ("Krizhevsky's speed-up", "{krizhevsky_speedup}"),
    rows=lambda result: result["owt_variants_k20"]["rows"])

# Final test top-1 of every run.
local_sgd_convergence = per_row(("run", "{run}"),
                                 ("final test top-1", lambda r: percent(r["eval_top1"][-1])))


def large_batch_tiny(results) -> str:
  """The first sweep (alexnet_bn_tiny): final test top-1 by global batch and rule."""
  rules = list(dict.fromkeys(r["rule"] for r in results))
  top1 = {(r["rule"], r["global_batch"]): r["eval_top1"] for r in results}
  steps = {r["global_batch"]: r["steps"] for r in results}
  return table(["global batch", "steps", *rules],
                ([b, steps[b], *(percent(top1[r, b]) if (r, b) in top1 else "—" for r in rules)]
                 for b in sorted(steps)))


def _top1(r) -> str:
  if r["eval_top1"] is None:
    return f"NaN at step {r['diverged_at_step']}"
  return percent(r["eval_top1"])


_LARGE_BATCH_RULES = ("none", "linear", "linear+warmup", "lars")  # large_batch.RULES' order.
_REFERENCE_BATCH = 32  # large_batch.REFERENCE_BATCH; its tables compare 8× it.


def _best_sweep_cells(results) -> dict:
  """(model, batch, rule) → the sweep's best cell (a rule run with several settings)."""
  cells = {}
  for r in results:
    key = (r["model"], r["global_batch"], r["rule"])
    if r.get("part") == "sweep" and (key not in cells or (r["eval_top1"] or 0.0) >
                                     (cells[key]["eval_top1"] or 0.0)):
      cells[key] = r
  return cells


def _cell(cells: dict, key) -> str:
  return _top1(cells[key]) if key in cells else "—"


def large_batch(results) -> str:
  """The sweep: final test top-1 by model and global batch (rows) and rule (columns), the best
  cell where a rule was run with several settings (large_batch_grid lists them); "" until a
  cell of the sweep has run."""
  sweep = [r for r in results if r.get("part") == "sweep"]
  if not sweep:
    return ""
  rules = [rule for rule in _LARGE_BATCH_RULES if any(r["rule"] == rule for r in sweep)]
  cells = _best_sweep_cells(results)
  models = list(dict.fromkeys(r["model"] for r in sweep))
  rows = sorted({(r["model"], r["global_batch"], r["steps"]) for r in sweep},
                key=lambda x: (models.index(x[0]), x[1]))
  return table(["model", "global batch", "steps", *rules],
                ([model, batch, steps, *(_cell(cells, (model, batch, rule)) for rule in rules)]
                 for model, batch, steps in rows))


def large_batch_summary(results) -> str:
  """The README's view of the sweep: per model, the reference batch, every rule's best at 8×
  it, and the best rule at the largest batch run ("" until a cell of the sweep has run)."""
  cells = _best_sweep_cells(results)
  if not cells:
    return ""
  models = list(dict.fromkeys(model for model, _, _ in cells))
  rules = [rule for rule in _LARGE_BATCH_RULES if any(key[2] == rule for key in cells)]
  reference, large = _REFERENCE_BATCH, 8 * _REFERENCE_BATCH
  largest = max(batch for _, batch, _ in cells)

  def best_at_largest(model) -> str:
    runs = [cells[k] for k in cells if k[:2] == (model, largest)]
    best = max(runs, key=lambda r: r["eval_top1"] or 0.0) if runs else None
    return f"{best['rule']} {_top1(best)}" if best else "—"

  return table(["model", f"batch {reference}, none", *(f"{large}, {rule}" for rule in rules),
                 f"{largest}, best rule"],
                ([model, _cell(cells, (model, reference, "none")),
                  *(_cell(cells, (model, large, rule)) for rule in rules), best_at_largest(model)]
                 for model in models))


def _lars(r, key: str):
  return r[key] if r["rule"] == "lars" else "—"


# Every setting tried at 8× the reference batch for the rules that have settings (warmup; LARS's
# η and trust coefficient): the tuning grid and the sweep's cells ("" until one ran).
_large_batch_grid = per_row(
    ("model", "{model}"), ("rule", "{rule}"), ("warmup epochs", "{warmup_epochs}"),
    ("LARS η (at batch 32)", lambda r: _lars(r, "lars_lr")),
    ("LARS trust coefficient", lambda r: _lars(r, "lars_trust")), ("peak LR", "{peak_lr}"),
    ("test top-1", _top1),
    ("final training loss", lambda r: r["train_loss"][-1] if r["train_loss"] else "—"),
    rows=lambda results: [r for r in results if r.get("part") == "grid" or (
        r.get("part") == "sweep" and r["global_batch"] == 8 * _REFERENCE_BATCH
        and r["rule"] in ("linear+warmup", "lars"))])


def large_batch_grid(results) -> str:
  table = _large_batch_grid(results)
  return table if table.count("\n") > 1 else ""  # more than the header: something was tried.


def _decoding_on(row) -> str:
  if "threads" not in row:
    return f"tf.data, {row['cores']} cores"
  if row["workers"]:
    return f"{row['workers']} worker processes"
  return f"{row['threads']} thread" + ("s" if row["threads"] > 1 else "")


def input_pipeline(result) -> str:
  """Images/s of each input path alone at global batch 256, per host core, and the training step
  they feed on the same machine."""
  rows = [[p["source"], p["host_work"], _decoding_on(p), f"{p['images_per_sec_median']:,.0f}",
           f"{p['images_per_sec_per_core']:,.0f}"] for p in result["pipelines"]]
  finish = [p["device_finish_images_per_sec"] for p in result["pipelines"]
            if "device_finish_images_per_sec" in p]
  if finish:
    rows.append(["on the device (here this CPU): crop 224, flip, lighting, normalise", "", "",
                 f"{finish[0]:,.0f}", ""])
  return table(["source", "host's work per image", "decoding on", "images/s (median)",
                 "per core"], rows)


# `python -m input_pipeline.prepare` on the benchmark's photographs, and ImageNet from it.
input_pipeline_prepare = per_row(
    ("format", lambda p: (f"JPEG q{p['quality']}" if p["format"] == "jpeg" else "raw uint8")
     + f", {p['size']}²"),
    ("images/s (all cores, pool start included)", "{images_per_sec:,.0f}"),
    ("per core (timed apart)", "{images_per_sec_per_core:,.0f}"),
    ("bytes per image", "{bytes_per_image:,}"), ("ImageNet on disk", "{imagenet_gb:,.1f} GB"),
    ("ImageNet core-hours", "{imagenet_core_hours:,.1f}"), rows=lambda result: result["prepare"])

# Every config trained end to end by main.py.
table1 = per_row(
    ("config", "{config}"), ("mesh", "{mesh}"), ("steps", "{steps}"),
    ("wall-clock", "{wall_clock_s} s"),
    ("train images/s (median)", "{train_images_per_sec_median}"),
    ("test top-1", lambda r: percent(r["eval_top1"])),
    ("test top-5", lambda r: percent(r["eval_top5"])))

# benchmarks/owt_variants.py: owt8 under (a) and (b) at equal epochs.
owt_variants = per_row(
    ("run", "{run}"),
    ("overrides of its config", lambda r: f"`{r['config']}` " + (
        " ".join(o.removeprefix("--config.") for o in r["overrides"]) or "—")),
    ("steps (= epochs)", "{steps}"), ("test top-1", lambda r: percent(r["eval_top1"])),
    ("top-5", lambda r: percent(r["eval_top5"])), ("wall-clock s", "{wall_clock_s}"))

# Our single-device step against PyTorch eager on the same CPU, tuned and untuned.
pytorch_reference = per_row(
    ("our step", lambda r: "tuned (default)" if r["tune_xla_cpu"]
     else "XLA's default options (`--notune_xla_cpu`)"),
    ("ours ms (p10–p90)", spread("jax_step_ms")), ("PyTorch ms (p10–p90)", spread("torch_step_ms")),
    ("ours images/s", "{jax_images_per_sec}"), ("PyTorch images/s", "{torch_images_per_sec}"),
    ("ratio", "{ratio}"))

# Max-pool forward + backward: reduce_window's gradient against ours.
max_pool = per_row(
    ("input (batch, side, side, channels)", lambda r: tuple(r["input"])),
    ("reduce_window ms", "{reduce_window_ms}"), ("ours ms", "{ours_ms}"),
    ("speed-up", "{speedup}"))


def grouped_conv(result) -> str:
  """benchmarks/grouped_conv.py: one grouped XLA convolution against one conv per column."""
  rows = [[f"alexnet {r['layer']}, forward + backward", tuple(r["input"]),
           r["feature_group_count_ms"], r["per_group_ms"], r["speedup"]] for r in result["layers"]]
  rows += [[f"{r['model']} single-device training step",
            f"({r['batch']}, {r['image_size']}, {r['image_size']}, 3)",
            r["feature_group_count_step_ms"], r["per_group_step_ms"], r["speedup"]]
           for r in result["steps"]]
  return table(["what", "input", "feature_group_count ms", "per_group ms", "speed-up"], rows)


def soak(result) -> str:
  """benchmarks/soak.py: a run killed and restarted again and again against an uninterrupted one."""
  yes = lambda x: "yes" if x is True else ("no" if x is False else x)
  return table(["what", "result"], ([what, yes(value)] for what, value in (
      ("run", f"{result['config']}, {result['steps']} steps, kill moments drawn with seed "
              f"{result['seed']}"),
      ("SIGKILLs survived", result["sigkills"]),
      ("of them during a checkpoint save", result["sigkills_during_a_save"]),
      ("then SIGTERM and SIGINT, each followed by a restart",
       ", ".join(f"{e['signal']} → exit {e['exit']}" for e in result["events"]
                 if e["signal"] != "SIGKILL")),
      ("final parameters and optimiser state bitwise equal to the uninterrupted run's",
       result["final_state_bitwise_equal"]),
      ("checkpoints left on disk readable", result["checkpoints_readable"]),
      ("metrics.jsonl holds each step once", result["metrics_each_step_once"]),
      ("TensorBoard holds each step once", result["tensorboard_each_step_once"]),
      ("wall-clock: uninterrupted / interrupted (s)",
       f"{result['uninterrupted_s']} / {result['interrupted_s']}"),
      ("time lost to the interruptions (s)", result["time_lost_s"]))))


# Table name → (its function, the JSON files in docs/ it reads; several are passed as a list).
SOURCES = {
    "tpu_compile": (accelerator_tables.tpu_compile, "tpu.json"),
    "tpu_choices": (accelerator_tables.tpu_choices, "tpu_choices.json"),
    "gpu_compile": (accelerator_tables.gpu_compile, "gpu_compile.json"),
    "gpu_compile_ranking": (accelerator_tables.gpu_compile_ranking, "gpu_compile.json"),
    "gpu_compile_largest": (accelerator_tables.gpu_compile_largest, "gpu_compile.json"),
    "throughput": (throughput, "throughput.json"),
    "comm_volume": (comm_volume, "comm_volume.json"),
    "comm_volume_algorithms": (comm_volume_algorithms, "comm_volume.json"),
    "scaling_model": (scaling_model, "scaling_model.json"),
    "scaling_model_yadan": (scaling_model_yadan, "scaling_model.json"),
    "scaling_model_owt": (scaling_model_owt, "scaling_model.json"),
    "local_sgd_convergence": (local_sgd_convergence, "local_sgd_convergence.json"),
    "large_batch_tiny": (large_batch_tiny, "large_batch_tiny.json"),
    "large_batch": (large_batch, "large_batch.json"),
    "large_batch_grid": (large_batch_grid, "large_batch.json"),
    "large_batch_summary": (large_batch_summary, "large_batch.json"),
    "input_pipeline": (input_pipeline, "input_pipeline.json"),
    "input_pipeline_prepare": (input_pipeline_prepare, "input_pipeline.json"),
    "table1": (table1, "table1.json"),
    "owt_variants": (owt_variants, "owt_variants.json"),
    "pytorch_reference": (pytorch_reference,
                          ("pytorch_reference.json", "pytorch_reference_untuned.json")),
    "max_pool": (max_pool, "max_pool.json"),
    "grouped_conv": (grouped_conv, "grouped_conv.json"),
    "soak": (soak, "soak.json"),
    "gpu_environment": (accelerator_tables.environment, "gpu.json"),
    "gpu_single_device": (accelerator_tables.single_device, "gpu.json"),
    "gpu_pytorch": (accelerator_tables.pytorch, "gpu.json"),
    "gpu_top_ops": (accelerator_tables.top_ops, "gpu.json"),
    "gpu_tuning": (accelerator_tables.tuning, "gpu.json"),
    "gpu_mock": (accelerator_tables.mock, "gpu.json"),
    "gpu_single_device_direct_stem": (accelerator_tables.single_device, "gpu_direct_stem.json"),
    "gpu_top_ops_direct_stem": (accelerator_tables.top_ops, "gpu_direct_stem.json"),
    "gpu_tuning_direct_stem": (accelerator_tables.tuning, "gpu_direct_stem.json"),
}


def _load(path: str):
  with open(path) as f:
    return json.load(f)


def load_if_present(path: str, default=()):
  """The JSON at `path`, or `default` (a list) when there is none yet."""
  return _load(path) if os.path.exists(path) else list(default)


def _files(name: str) -> tuple[str, ...]:
  files = SOURCES[name][1]
  return files if isinstance(files, tuple) else (files,)


def measured(name: str, docs: str = DOCS) -> bool:
  """Whether the JSON table `name` is made from is in `docs` and holds rows for it (one JSON can
  feed several tables, e.g. the large-batch sweep and its tuning grid)."""
  return (all(os.path.exists(os.path.join(docs, f)) for f in _files(name))
          and bool(render(name, docs)))


def render(name: str, docs: str = DOCS) -> str:
  """The Markdown of table `name` from its JSON in `docs`."""
  function, files = SOURCES[name]
  if isinstance(files, tuple):
    return function([_load(os.path.join(docs, f)) for f in files])
  return function(_load(os.path.join(docs, files)))


def pages(root: str = ROOT) -> list[str]:
  """The Markdown pages that may include tables: README.md and docs/*.md."""
  docs = os.path.join(root, "docs")
  return [os.path.join(root, "README.md")] + sorted(
      os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def refresh(text: str, docs: str = DOCS) -> str:
  """`text` with every table block's body rendered anew from its JSON (a block whose JSON is not
  there yet is left as it is)."""

  def block(m):
    if not measured(m.group("name"), docs):
      return m.group(0)
    return m.group(1) + render(m.group("name"), docs) + "\n" + m.group(4)

  return _BLOCK.sub(block, text)


def update_docs(root: str = ROOT, *, check: bool = False) -> list[str]:
  """Rewrites the table blocks of every page (or, with `check`, only reports them).

  Returns:
    The pages whose blocks differed from their JSON.
  """
  stale = []
  for page in pages(root):
    with open(page) as f:
      text = f.read()
    fresh = refresh(text, os.path.join(root, "docs"))
    if fresh != text:
      stale.append(os.path.relpath(page, root))
      if not check:
        with open(page, "w") as f:
          f.write(fresh)
  return stale


def publish(data, path: str) -> None:
  """Writes a benchmark's JSON to `path`; when that is docs/, refreshes the tables made from it."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w") as f:
    json.dump(data, f, indent=1)
    f.write("\n")
  if os.path.dirname(os.path.abspath(path)) == DOCS:
    rewritten = update_docs()
    print(f"wrote {os.path.relpath(path, ROOT)}; refreshed its tables in "
          f"{', '.join(rewritten) or 'no page (unchanged)'}", file=sys.stderr)


def main(*, check: bool) -> None:
  stale = update_docs(check=check)
  if check and stale:
    print(f"error: tables differ from their JSON in {', '.join(stale)}; run "
          f"`python -m benchmarks.tables`.", file=sys.stderr)
    sys.exit(1)
  print(f"{'stale' if check else 'rewrote'}: {', '.join(stale) or 'nothing'}")


if __name__ == "__main__":
  # Flags only when run: the benchmarks import this module beside their own flags.
  from absl import app, flags
  _CHECK = flags.DEFINE_bool("check", False, "Only report the tables that differ; exit 1 if any.")
  app.run(lambda argv: main(check=_CHECK.value))
