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


def _header(*columns: str) -> list[str]:
  """A Markdown table's header row and separator: the first two of its lines."""
  cells = (f" {c} " if c else " " for c in columns)  # an empty header cell is "| |".
  return ["|" + "|".join(cells) + "|", "|---" * len(columns) + "|"]


def _table(columns: tuple[str, ...], rows) -> str:
  """A Markdown table: the header `columns`, then each of `rows` (a sequence of cells)."""
  return "\n".join(_header(*columns) + ["| " + " | ".join(map(str, cells)) + " |"
                                        for cells in rows])


def _mb(x: float) -> str:
  return f"{x / 1e6:.1f}"


def _percent(x: float) -> str:
  return f"{100 * x:.2f}%"


def throughput(rows) -> str:
  """Every config under every backend; time per image relative to `single` on the same backend."""
  single = {r["backend"]: r["step_time_ms"]["median"] / r["global_batch"] for r in rows
            if r["config"] == "single"}
  lines = _header("config", "backend", "mesh", "batch", "images/s", "step ms (median, p10–p90)",
                  "per image vs single", "MFU", "busiest device MB/step", "compile s")
  for r in rows:
    t = r["step_time_ms"]
    ratio = t["median"] / r["global_batch"] / single[r["backend"]]
    lines.append(f"| {r['config']} | {r['backend']} | {r['mesh'][0]}×{r['mesh'][1]} | "
                 f"{r['global_batch']} | {r['images_per_sec']} | {t['median']} ({t['p10']}–"
                 f"{t['p90']}) | {ratio:.2f} | {100 * r['mfu']:.1f}% | "
                 f"{_mb(r['hlo_busiest_device_bytes'])} | {r['compile_s']} |")
  return "\n".join(lines)


COMM_VOLUME_ALGORITHMS_CONFIG = "data4"  # benchmarks/comm_volume.py --all measures it with each.


def comm_volume(rows) -> str:
  """Bytes per device from the compiled HLO beside the analytic minimum (psum rows)."""
  lines = _header("config", "mesh", "batch", "all-reduce MB (ops)", "all-gather", "reduce-scatter",
                  "collective-permute", "HLO total MB",
                  "analytic minimum MB (gradients + activations)")
  for r in rows:
    if r["grad_reduce"] != "psum":
      continue
    cell = lambda kind, r=r: (f"{_mb(r['hlo'][kind]['bytes_per_device'])} "
                              f"({r['hlo'][kind]['ops']})" if kind in r["hlo"] else "—")
    a = r["analytic_bytes_per_device"]
    name = r["config"] + (f" ({r['owt_variant']})" if r.get("owt_variant", "a") != "a" else "")
    lines.append(f"| {name} | {r['mesh'][0]}×{r['mesh'][1]} | {r['global_batch']} | "
                 f"{cell('all-reduce')} | {cell('all-gather')} | {cell('reduce-scatter')} | "
                 f"{cell('collective-permute')} | {_mb(r['hlo_bytes_per_device'])} | "
                 f"{_mb(a['total'])} ({_mb(a['gradients'])} + {_mb(a['activations'])}) |")
  return "\n".join(lines)


def comm_volume_algorithms(rows) -> str:
  """data4's gradient all-reduce by each algorithm: mean and busiest device."""
  lines = _header("`grad_reduce`", "HLO collectives", "mean MB sent per device",
                  "busiest device MB")
  for r in rows:
    if r["config"] != COMM_VOLUME_ALGORITHMS_CONFIG:
      continue
    ops = ", ".join(f"{stats['ops']} {kind}" for kind, stats in r["hlo"].items())
    lines.append(f"| `{r['grad_reduce']}` | {ops} | {_mb(r['hlo_bytes_per_device'])} | "
                 f"{_mb(r['hlo_busiest_device_bytes'])} |")
  return "\n".join(lines)


def scaling_model(result) -> str:
  """Predicted speed-up vs devices, by all-reduce algorithm."""
  algorithms = list(result["speedup_vs_devices"])
  devices = sorted({p["devices"] for points in result["speedup_vs_devices"].values()
                    for p in points})
  lines = _header("devices", *(a.replace("_", " ") for a in algorithms))
  for n in devices:
    cells = []
    for algorithm in algorithms:
      points = [p["speedup"] for p in result["speedup_vs_devices"][algorithm] if p["devices"] == n]
      cells.append(f"{points[0]:.1f}" if points else "—")
    lines.append(f"| {n} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def scaling_model_yadan(result) -> str:
  """Yadan et al.'s Table 1 through the α-β model."""
  lines = _header("configuration", "mesh", "MB per device and step", "predicted days", "paper days",
                  "predicted speed-up", "paper speed-up", "bandwidth the paper's days imply")
  for r in result["yadan_table1"]:
    implied = "—" if r["implied_gb_per_s"] is None else f"{r['implied_gb_per_s']} GB/s"
    lines.append(f"| {r['configuration']} | {r['mesh']} | {r['mb_per_device']} | "
                 f"{r['predicted_days']} | {r['paper_days']} | {r['predicted_speedup']} | "
                 f"{r['paper_speedup']} | {implied} |")
  return "\n".join(lines)


def scaling_model_owt(result) -> str:
  """Krizhevsky 2014's owt schemes on 8 K20s through the α-β model."""
  lines = _header("scheme", "FC updates per step", "batches (conv, FC)", "predicted s per step",
                  "exposed communication s", "predicted speed-up", "Krizhevsky's speed-up")
  lines += [f"| ({r['variant']}) | {r['fc_updates_per_step']} | {r['batches (conv, FC)']} | "
            f"{r['step_s']} | {r['exposed_communication_s']} | {r['predicted_speedup']} | "
            f"{r['krizhevsky_speedup']} |" for r in result["owt_variants_k20"]["rows"]]
  return "\n".join(lines)


def local_sgd_convergence(results) -> str:
  """Final test top-1 of every run."""
  lines = _header("run", "final test top-1")
  lines += [f"| {r['run']} | {_percent(r['eval_top1'][-1])} |" for r in results]
  return "\n".join(lines)


def large_batch_tiny(results) -> str:
  """The first sweep (alexnet_bn_tiny): final test top-1 by global batch and rule."""
  rules = list(dict.fromkeys(r["rule"] for r in results))
  batches = sorted({r["global_batch"] for r in results})
  top1 = {(r["rule"], r["global_batch"]): r["eval_top1"] for r in results}
  steps = {r["global_batch"]: r["steps"] for r in results}
  lines = _header("global batch", "steps", *rules)
  lines += [f"| {b} | {steps[b]} | " + " | ".join(_percent(top1[r, b]) if (r, b) in top1
                                                   else "—" for r in rules) + " |"
            for b in batches]
  return "\n".join(lines)


def _top1(r) -> str:
  if r["eval_top1"] is None:
    return f"NaN at step {r['diverged_at_step']}"
  return _percent(r["eval_top1"])


def large_batch(results) -> str:
  """The sweep: final test top-1 by model and global batch (rows) and rule (columns), the best
  cell where a rule was run with several settings (large_batch_grid lists them); "" until a
  cell of the sweep has run."""
  sweep = [r for r in results if r.get("part") == "sweep"]
  if not sweep:
    return ""
  rules = [rule for rule in _LARGE_BATCH_RULES if any(r["rule"] == rule for r in sweep)]
  cells = _best_sweep_cells(results)
  rows = sorted({(r["model"], r["global_batch"], r["steps"]) for r in sweep},
                key=lambda x: (list(dict.fromkeys(r["model"] for r in sweep)).index(x[0]), x[1]))
  lines = _header("model", "global batch", "steps", *rules)
  lines += [f"| {model} | {batch} | {steps} | " +
            " | ".join(_top1(cells[model, batch, rule]) if (model, batch, rule) in cells
                       else "—" for rule in rules) + " |" for model, batch, steps in rows]
  return "\n".join(lines)


_LARGE_BATCH_RULES = ("none", "linear", "linear+warmup", "lars")  # large_batch.RULES' order.


def _best_sweep_cells(results) -> dict:
  """(model, batch, rule) → the sweep's best cell (a rule run with several settings)."""
  cells = {}
  for r in results:
    if r.get("part") != "sweep":
      continue
    key = (r["model"], r["global_batch"], r["rule"])
    if key not in cells or (r["eval_top1"] or 0.0) > (cells[key]["eval_top1"] or 0.0):
      cells[key] = r
  return cells


def large_batch_summary(results) -> str:
  """The README's view of the sweep: per model, the reference batch, every rule's best at 8×
  it, and the best rule at the largest batch run ("" until a cell of the sweep has run)."""
  cells = _best_sweep_cells(results)
  if not cells:
    return ""
  models = list(dict.fromkeys(model for model, _, _ in cells))
  rules = [rule for rule in _LARGE_BATCH_RULES if any(key[2] == rule for key in cells)]
  reference, large = 32, 8 * 32  # large_batch.REFERENCE_BATCH and 8× it.
  largest = max(batch for _, batch, _ in cells)
  lines = _header("model", f"batch {reference}, none", *(f"{large}, {rule}" for rule in rules),
                  f"{largest}, best rule")
  for model in models:
    row = [_top1(cells[model, reference, "none"]) if (model, reference, "none") in cells
           else "—"]
    row += [_top1(cells[model, large, rule]) if (model, large, rule) in cells else "—"
            for rule in rules]
    at_largest = [cells[k] for k in cells if k[:2] == (model, largest)]
    best = max(at_largest, key=lambda r: r["eval_top1"] or 0.0) if at_largest else None
    row.append(f"{best['rule']} {_top1(best)}" if best else "—")
    lines.append(f"| {model} | " + " | ".join(row) + " |")
  return "\n".join(lines)


def large_batch_grid(results) -> str:
  """Every setting tried at 8× the reference batch for the rules that have settings (warmup;
  LARS's η and trust coefficient): the tuning grid and the sweep's cells ("" until one ran)."""
  tried = [r for r in results if r.get("part") == "grid" or (
      r.get("part") == "sweep" and r["global_batch"] == 8 * 32  # 8 × large_batch's reference.
      and r["rule"] in ("linear+warmup", "lars"))]
  if not tried:
    return ""
  lines = _header("model", "rule", "warmup epochs", "LARS η (at batch 32)",
                  "LARS trust coefficient", "peak LR", "test top-1", "final training loss")
  for r in tried:
    lars = r["rule"] == "lars"
    lines.append(f"| {r['model']} | {r['rule']} | {r['warmup_epochs']} | "
                 f"{r['lars_lr'] if lars else '—'} | {r['lars_trust'] if lars else '—'} | "
                 f"{r['peak_lr']} | {_top1(r)} | "
                 f"{r['train_loss'][-1] if r['train_loss'] else '—'} |")
  return "\n".join(lines)


def input_pipeline(result) -> str:
  """Images/s of each input path alone at global batch 256, per host core, and the training step
  they feed on the same machine."""
  lines = _header("source", "host's work per image", "decoding on", "images/s (median)",
                  "per core")
  for p in result["pipelines"]:
    lines.append(f"| {p['source']} | {p['host_work']} | {_decoding_on(p)} | "
                 f"{p['images_per_sec_median']:,.0f} | {p['images_per_sec_per_core']:,.0f} |")
  finish = [p["device_finish_images_per_sec"] for p in result["pipelines"]
            if "device_finish_images_per_sec" in p]
  if finish:
    lines.append(f"| on the device (here this CPU): crop 224, flip, lighting, normalise | | | "
                 f"{finish[0]:,.0f} | |")
  return "\n".join(lines)


def _decoding_on(row) -> str:
  if "threads" not in row:
    return f"tf.data, {row['cores']} cores"
  if row["workers"]:
    return f"{row['workers']} worker processes"
  return f"{row['threads']} thread" + ("s" if row["threads"] > 1 else "")


def input_pipeline_prepare(result) -> str:
  """`python -m input_pipeline.prepare` on the benchmark's photographs, and ImageNet from it."""
  lines = _header("format", "images/s (all cores, pool start included)",
                  "per core (timed apart)", "bytes per image", "ImageNet on disk",
                  "ImageNet core-hours")
  for p in result["prepare"]:
    name = f"JPEG q{p['quality']}" if p["format"] == "jpeg" else "raw uint8"
    lines.append(f"| {name}, {p['size']}² | {p['images_per_sec']:,.0f} | "
                 f"{p['images_per_sec_per_core']:,.0f} | {p['bytes_per_image']:,} | "
                 f"{p['imagenet_gb']:,.1f} GB | {p['imagenet_core_hours']:,.1f} |")
  return "\n".join(lines)


def table1(rows) -> str:
  """Every config trained end to end by main.py."""
  lines = _header("config", "mesh", "steps", "wall-clock", "train images/s (median)", "test top-1",
                  "test top-5")
  lines += [f"| {r['config']} | {r['mesh']} | {r['steps']} | {r['wall_clock_s']} s | "
            f"{r['train_images_per_sec_median']} | {_percent(r['eval_top1'])} | "
            f"{_percent(r['eval_top5'])} |" for r in rows]
  return "\n".join(lines)


def owt_variants(results) -> str:
  """benchmarks/owt_variants.py: owt8 under (a) and (b) at equal epochs."""
  lines = _header("run", "overrides of its config", "steps (= epochs)", "test top-1", "top-5",
                  "wall-clock s")
  for r in results:
    overrides = " ".join(o.removeprefix("--config.") for o in r["overrides"]) or "—"
    lines.append(f"| {r['run']} | `{r['config']}` {overrides} | {r['steps']} | "
                 f"{_percent(r['eval_top1'])} | {_percent(r['eval_top5'])} | "
                 f"{r['wall_clock_s']} |")
  return "\n".join(lines)


def pytorch_reference(results) -> str:
  """Our single-device step against PyTorch eager on the same CPU, tuned and untuned."""
  lines = _header("our step", "ours ms (p10–p90)", "PyTorch ms (p10–p90)", "ours images/s",
                  "PyTorch images/s", "ratio")
  for r in results:
    ours, torch = r["jax_step_ms"], r["torch_step_ms"]
    label = ("tuned (default)" if r["tune_xla_cpu"]
             else "XLA's default options (`--notune_xla_cpu`)")
    lines.append(f"| {label} | {ours['median']} ({ours['p10']}–{ours['p90']}) | "
                 f"{torch['median']} ({torch['p10']}–{torch['p90']}) | "
                 f"{r['jax_images_per_sec']} | {r['torch_images_per_sec']} | {r['ratio']} |")
  return "\n".join(lines)


def max_pool(rows) -> str:
  """Max-pool forward + backward: reduce_window's gradient against ours."""
  lines = _header("input (batch, side, side, channels)", "reduce_window ms", "ours ms", "speed-up")
  lines += [f"| {tuple(r['input'])} | {r['reduce_window_ms']} | {r['ours_ms']} | "
            f"{r['speedup']} |" for r in rows]
  return "\n".join(lines)


def grouped_conv(result) -> str:
  """benchmarks/grouped_conv.py: one grouped XLA convolution against one conv per column."""
  lines = _header("what", "input", "feature_group_count ms", "per_group ms", "speed-up")
  lines += [f"| alexnet {r['layer']}, forward + backward | {tuple(r['input'])} | "
            f"{r['feature_group_count_ms']} | {r['per_group_ms']} | {r['speedup']} |"
            for r in result["layers"]]
  lines += [f"| {r['model']} single-device training step | ({r['batch']}, {r['image_size']}, "
            f"{r['image_size']}, 3) | {r['feature_group_count_step_ms']} | "
            f"{r['per_group_step_ms']} | {r['speedup']} |" for r in result["steps"]]
  return "\n".join(lines)


def soak(result) -> str:
  """benchmarks/soak.py: a run killed and restarted again and again against an uninterrupted one."""
  yes = lambda x: "yes" if x is True else ("no" if x is False else x)
  lines = _header("what", "result")
  lines += [f"| {what} | {yes(value)} |" for what, value in (
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
      ("time lost to the interruptions (s)", result["time_lost_s"]))]
  return "\n".join(lines)


def accelerator_single_device(report) -> str:
  """benchmarks/accelerator.py: our train step on one device."""
  rows = report["sections"]["single_device"]["result"]
  lines = _header("model", "dtype", "batch", "images/s", "step ms", "compile s", "program GiB",
                  "process's peak GiB so far", "MFU")
  for r in rows:
    mfu = "—" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%"
    peak = "—" if r["device_peak_gib"] is None else r["device_peak_gib"]
    lines.append(f"| {r['model']} | {r['dtype']} | {r['batch']} | {r['images_per_sec']} | "
                 f"{r['step_ms']} | {r['compile_s']} | {r['program_gib']} | {peak} | {mfu} |")
  return "\n".join(lines)


def accelerator_pytorch(report) -> str:
  """benchmarks/accelerator.py: PyTorch's variants, and ours ÷ the best of them."""
  result = report["sections"]["pytorch"]["result"]
  lines = _header("PyTorch variant", "batch", "images/s", "step ms", "setup s")
  lines += [f"| {r['variant']} | {r['batch']} | {r['images_per_sec']} | {r['step_ms']} | "
            f"{r['setup_s']} |" for r in result["variants"]]
  lines += ["", *_header("batch", "our dtype", "ours images/s", "best PyTorch (variant)",
                         "ours ÷ best")]
  lines += [f"| {r['batch']} | {r['dtype']} | {r['ours_images_per_sec']} | "
            f"{r['best_torch_images_per_sec']} ({r['best_torch_variant']}) | {r['ratio']} |"
            for r in result.get("comparison", [])]
  if "incomplete" in result:
    lines += ["", f"Incomplete: {result['incomplete'].splitlines()[0]}"]
  return "\n".join(lines)


def accelerator_top_ops(report) -> str:
  """benchmarks/accelerator.py: where the step's device time goes."""
  result = report["sections"]["profile"]["result"]
  lines = _header("operation", "ms per step", "share", "calls", "kernel")
  lines += [f"| `{r['op']}` | {r['ms_per_step']} | {100 * r['share']:.1f}% | {r['calls']} | "
            f"`{r['kernel'][:60]}` |" for r in result["top_ops"]]
  return "\n".join(lines)


def accelerator_tuning(report) -> str:
  """benchmarks/accelerator.py: one change at a time against the baseline, same run."""
  rows = report["sections"]["tuning"]["result"]
  lines = _header("variant", "images/s", "step ms", "compile s", "vs baseline")
  lines += [f"| {r['variant']} | {r['images_per_sec']} | {r['step_ms']} | {r['compile_s']} | "
            f"{r['vs_baseline']} |" for r in rows]
  return "\n".join(lines)


def accelerator_mock(report) -> str:
  """benchmarks/accelerator.py: 8-GPU programs on one device (mocked collectives)."""
  rows = report["sections"]["mock_multi_gpu"]["result"]
  lines = _header("config", "scheme", "mesh", "batch", "step ms (one device)", "MB per device",
                  "gradient all-reduces overlapping compute",
                  "predicted 8-GPU step ms (NVLink / 400 Gb/s NIC)")
  for r in rows:
    if "error" in r:
      # A time limit says so on its first line (then the stacks); an exception on its last.
      error = r["error"].splitlines()
      why = error[0].split(";")[0] if "time limit" in error[0] else error[-1]
      lines.append(f"| {r['name']} | error: {why[:110]} |" + " |" * 6)
      continue
    predicted = (f"{r['predicted_step_ms']} / {r['predicted_step_ms_over_nic']}"
                 if "predicted_step_ms" in r else "—")
    overlap = (f"{r['all_reduces_with_compute_in_flight']} of {r['async_all_reduces']} async "
               f"({_mb(r['all_reduce_bytes_with_compute_in_flight'])} of "
               f"{_mb(r['all_reduce_bytes'])} MB)" if r["async_all_reduces"]
               else "none async (synchronous collectives)")
    lines.append(f"| {r['name']} | {r['scheme']} | {r['mesh'][0]}×{r['mesh'][1]} | "
                 f"{r['global_batch']} | {r['step_ms']} | {_mb(r['bytes_per_device'])} | "
                 f"{overlap} | {predicted} |")
  return "\n".join(lines)


def accelerator_environment(report) -> str:
  """benchmarks/accelerator.py: the machine, and the trainer and notebook runs on it."""
  env = report["sections"]["environment"]["result"]
  smi = (env.get("nvidia_smi") or "").strip().splitlines()
  card = dict(zip([h.strip() for h in smi[0].split(",")], [v.strip() for v in smi[1].split(",")])
              ) if len(smi) == 2 else {}
  rows = [("date", env["date"]), ("device", f"{env['device_kind']} × {env['device_count']}"),
          ("driver / CUDA", f"{card.get('driver_version', '?')} / {env['platform_version']}"),
          ("SM clock (found at / max)", f"{card.get('clocks.current.sm [MHz]', '?')} / "
                                        f"{card.get('clocks.max.sm [MHz]', '?')}"),
          ("JAX / jaxlib / Python", f"{env['jax']} / {env['jaxlib']} / {env['python']}"),
          ("PyTorch", env.get("torch") or "—")]
  trainer = report["sections"].get("trainer", {}).get("result")
  if isinstance(trainer, dict):  # reports before the trainer was set against the bare step.
    rows.append(("main.py (owt8's settings on 1×1, bfloat16, batch 256, 224²)",
                 f"{trainer['steps']} steps in {trainer['wall_clock_s']} s, median "
                 f"{trainer['images_per_sec_median']} images/s, final train loss "
                 f"{trainer['final_train_loss']}, eval loss {trainer['eval_loss']}"))
  notebook = report["sections"].get("notebook", {}).get("result")
  if notebook and "final" in notebook:
    final = notebook["final"]
    rows.append(("notebooks/colab.ipynb", f"{final['steps']} steps of {final['model']} in "
                 f"{notebook['seconds']} s, eval top-1 {_percent(final['eval_top1'])}"))
  return "\n".join(_header("", "") + [f"| {k} | {v} |" for k, v in rows])


def accelerator_trainer(report) -> str:
  """benchmarks/accelerator.py: main.py against the bare step at the same settings."""
  lines = _header("model", "dtype", "batch", "main.py images/s (median)", "bare step images/s",
                  "main.py ÷ step", "steps", "wall-clock s")
  lines += [f"| {r['model']} | {r['dtype']} | {r['batch']} | {r['trainer_images_per_sec']} | "
            f"{r['step_images_per_sec']} | {r['trainer_vs_step']} | {r['steps']} | "
            f"{r['wall_clock_s']} |" for r in report["sections"]["trainer"]["result"]]
  return "\n".join(lines)


def tpu_compile(rows) -> str:
  """benchmarks/tpu_compile.py: each config compiled for each TPU topology (nothing measured)."""
  lines = _header("topology", "config", "dtype", "mesh", "compiled", "HBM GiB per device (fits)",
                  "collective MB per device", "analytic minimum MB", "estimated step ms (from)",
                  "estimated images/s", "jax / libtpu")
  for r in rows:
    versions = f" {r['jax']} / {r['libtpu']} |"
    if not r["compiled"]:
      lines.append(f"| {r['topology']} | {r['config']} | {r['dtype']} | | no: {r['reason']} |"
                   + " |" * 5 + versions)
      continue
    lines.append(f"| {r['topology']} | {r['config']} | {r['dtype']} | "
                 f"{r['mesh'][0]}×{r['mesh'][1]} | yes | {r['hbm_gib']} "
                 f"({'yes' if r['hbm_fits'] else 'no'}) | {r['collective_mb']} | "
                 f"{r['analytic_mb']} | {r['estimated_step_ms']} ({r['estimate']}) | "
                 f"{r['estimated_images_per_sec']:,} |" + versions)
  return "\n".join(lines)


def tpu_choices(result) -> str:
  """benchmarks/tpu_compile.py --choices / --largest_batch: estimates, nothing measured."""
  lines = _header("topology", "choice", "option", "model", "estimated step ms (from)", "HBM GiB")
  for r in result.get("choices", []):
    lines.append(f"| {r['topology']} | `{r['choice']}` | {r['option']} | {r['model']} | "
                 + (f"{r['estimated_step_ms']} ({r['estimate']}) | {r['hbm_gib']} |"
                    if r["compiled"] else f"not compiled: {r['reason']} | |"))
  lines += [""] + _header("topology", "config", "largest global batch that fits", "its HBM GiB",
                          "the next batch")
  lines += [f"| {r['topology']} | {r['config']} | {r['largest_global_batch'] or 'none'} | "
            f"{r['hbm_gib'] or ''} | {r['next_batch']}: {r['next']} |"
            for r in result.get("largest_batch", [])]
  return "\n".join(lines)


def gpu_compile(result) -> str:
  """benchmarks/gpu_compile.py: each config compiled for each GPU node (nothing run on a GPU)."""
  def cells(r):
    where = [r["gpu"], r["topology"], r["config"], r["dtype"]]
    if not r["compiled"]:
      return [*where, "", f"no: {r['reason']}"] + [""] * 8
    return [*where, f"{r['mesh'][0]}×{r['mesh'][1]}", f"{r['hbm_gib']} "
            f"({'yes' if r['hbm_fits'] else 'no'})", r["collective_mb"], r["analytic_mb"],
            r["crossing_hosts_mb"], f"{r['async_with_compute_in_flight']} of "
            f"{r['async_collectives']}", r["compute_ms"], r["exposed_comm_ms"],
            r["predicted_step_ms"], f"{r['predicted_images_per_sec']:,}"]
  return _table(("gpu", "topology", "config", "dtype", "mesh", "HBM GiB per GPU (fits 75%)",
                 "collective MB per GPU", "analytic minimum MB", "MB crossing hosts",
                 "async collectives with compute in flight", "compute ms", "exposed comm ms",
                 "predicted step ms", "predicted images/s"), map(cells, result["rows"]))


def gpu_compile_ranking(result) -> str:
  """benchmarks/gpu_compile.py: one node's predicted speed-ups beside Krizhevsky 2014's."""
  return _table(("gpu", "config (8 GPUs, batch 1024)", "predicted images/s",
                 "predicted speed-up over 1 GPU at 128", "the same, no overlap",
                 "Krizhevsky 2014, 8 K20s"),
                ([r["gpu"], r["config"], f"{r['predicted_images_per_sec']:,}",
                  r["predicted_speedup"], r["speedup_without_overlap"],
                  r["krizhevsky_speedup"] or "—"] for r in result.get("ranking", [])))


def gpu_compile_largest(result) -> str:
  """benchmarks/gpu_compile.py --largest_batch."""
  return _table(("gpu", "config", "largest global batch that fits (bfloat16)", "its HBM GiB",
                 "the next batch"),
                ([r["gpu"], r["config"], r["largest_global_batch"] or "none",
                  r["hbm_gib"] or "", f"{r['next_batch']}: {r['next']}"]
                 for r in result.get("largest_batch", [])))


def accelerator_report(report) -> str:
  """The whole report of benchmarks/accelerator.py, section by section."""
  tables_by_section = {"single_device": accelerator_single_device, "pytorch":
                       accelerator_pytorch, "profile": accelerator_top_ops,
                       "tuning": accelerator_tuning, "mock_multi_gpu": accelerator_mock,
                       "trainer": accelerator_trainer}
  out = ["# Accelerator report" + (" (dry run: tiny sizes)" if report["dry_run"] else ""), ""]
  for name, section in report["sections"].items():
    out.append(f"## {name} ({section.get('seconds', 0)} s)")
    out.append("")
    if "error" in section:
      out += ["```", section["error"].strip(), "```"]
    elif "skipped" in section or "skipped" in (section.get("result") or {}):
      out.append(f"Skipped: {section.get('skipped') or section['result']['skipped']}")
    elif name in tables_by_section:
      out.append(tables_by_section[name](report))
    else:
      out.append("```json\n" + json.dumps(section["result"], indent=1) + "\n```")
    out.append("")
  return "\n".join(out)


# Table name → (its function, the JSON files in docs/ it reads; several are passed as a list).
SOURCES = {
    "tpu_compile": (tpu_compile, "tpu.json"),
    "tpu_choices": (tpu_choices, "tpu_choices.json"),
    "gpu_compile": (gpu_compile, "gpu_compile.json"),
    "gpu_compile_ranking": (gpu_compile_ranking, "gpu_compile.json"),
    "gpu_compile_largest": (gpu_compile_largest, "gpu_compile.json"),
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
    "gpu_environment": (accelerator_environment, "gpu.json"),
    "gpu_single_device": (accelerator_single_device, "gpu.json"),
    "gpu_pytorch": (accelerator_pytorch, "gpu.json"),
    "gpu_top_ops": (accelerator_top_ops, "gpu.json"),
    "gpu_tuning": (accelerator_tuning, "gpu.json"),
    "gpu_mock": (accelerator_mock, "gpu.json"),
    "gpu_single_device_direct_stem": (accelerator_single_device, "gpu_direct_stem.json"),
    "gpu_top_ops_direct_stem": (accelerator_top_ops, "gpu_direct_stem.json"),
    "gpu_tuning_direct_stem": (accelerator_tuning, "gpu_direct_stem.json"),
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
