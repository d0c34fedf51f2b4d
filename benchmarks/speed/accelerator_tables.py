"""The accelerator pages' tables (docs/gpu.md, docs/tpu.md): accelerator.py's report from a
GPU, and the compile-only TPU and GPU rows (tpu_compile.py, gpu_compile.py), rendered from their
JSON by benchmarks/docs.py."""

import json

from benchmarks import TRACED, mb, per_row, percent, table


def _section(name: str, *keys: str):
  """The rows of an accelerator report's section `name` (under `keys` within its result)."""
  def rows(report):
    result = report["sections"][name]["result"]
    for key in keys:
      result = result[key]
    return result
  return rows


def _percent_or_dash(x) -> str:
  return "—" if x is None else f"{100 * x:.1f}%"


# benchmarks/speed/accelerator.py: our train step on one device.
single_device = per_row(
    ("model", "{model}"), ("dtype", "{dtype}"), ("batch", "{batch}"),
    ("images/s", "{images_per_sec}"), ("step ms", "{step_ms}"), ("compile s", "{compile_s}"),
    ("program GiB", "{program_gib}"),
    ("process's peak GiB so far", lambda r: "—" if r["device_peak_gib"] is None
     else r["device_peak_gib"]),
    ("MFU", lambda r: _percent_or_dash(r["mfu"])),
    # Steps dispatched back to back (reports before 2026-11-26 timed each step waited for only).
    ("pipelined: images/s (MFU)", lambda r: "—" if "images_per_sec_pipelined" not in r else
     f"{r['images_per_sec_pipelined']} ({_percent_or_dash(r['mfu_pipelined'])})"),
    rows=_section("single_device"), optional=("pipelined: images/s (MFU)",))

_pytorch_variants = per_row(
    ("PyTorch variant", "{variant}"), ("batch", "{batch}"), ("images/s", "{images_per_sec}"),
    ("step ms", "{step_ms}"), ("setup s", "{setup_s}"))
_pytorch_comparison = per_row(
    ("batch", "{batch}"), ("our dtype", "{dtype}"), ("ours images/s", "{ours_images_per_sec}"),
    ("best PyTorch (variant)", "{best_torch_images_per_sec} ({best_torch_variant})"),
    ("ours ÷ best", "{ratio}"))


def pytorch(report) -> str:
  """benchmarks/speed/accelerator.py: PyTorch's variants, and ours ÷ the best of them."""
  result = report["sections"]["pytorch"]["result"]
  text = (_pytorch_variants(result["variants"]) + "\n\n" +
          _pytorch_comparison(result.get("comparison", [])))
  if "incomplete" in result:
    text += f"\n\nIncomplete: {result['incomplete'].splitlines()[0]}"
  return text


# benchmarks/speed/accelerator.py: where the step's device time goes.
top_ops = per_row(
    ("operation", "`{op}`"), ("ms per step", "{ms_per_step}"),
    ("share", lambda r: f"{100 * r['share']:.1f}%"), ("calls", "{calls}"),
    ("kernel", lambda r: f"`{r['kernel'][:60]}`"), rows=_section("profile", "top_ops"))

# benchmarks/speed/accelerator.py: one change at a time against the baseline, same run.
tuning = per_row(
    ("variant", "{variant}"), ("images/s", "{images_per_sec}"), ("step ms", "{step_ms}"),
    ("compile s", "{compile_s}"), ("vs baseline", "{vs_baseline}"), rows=_section("tuning"))


def _mock_row(r) -> list:
  if "error" in r:
    # A time limit says so on its first line (then the stacks); an exception on its last.
    error = r["error"].splitlines()
    why = error[0].split(";")[0] if "time limit" in error[0] else error[-1]
    return [r["name"], f"error: {why[:110]}", *[""] * 6]
  predicted = (f"{r['predicted_step_ms']} / {r['predicted_step_ms_over_nic']}"
               if "predicted_step_ms" in r else "—")
  overlap = (f"{r['all_reduces_with_compute_in_flight']} of {r['async_all_reduces']} async "
             f"({mb(r['all_reduce_bytes_with_compute_in_flight'])} of "
             f"{mb(r['all_reduce_bytes'])} MB)" if r["async_all_reduces"]
             else "none async (synchronous collectives)")
  row = [r["name"], r["scheme"] + (f" ({r['owt_variant']})" if "owt_variant" in r else ""),
         f"{r['mesh'][0]}×{r['mesh'][1]}", r["global_batch"], r["step_ms"],
         mb(r["bytes_per_device"]), overlap, predicted]
  if "model_compute_ms" in r:
    row += [f"{r['model_compute_ms']} / {r['model_step_ms']}",
            f"{r['step_ms'] / r['model_compute_ms']:.2f}"]
  return row


def mock(report) -> str:
  """benchmarks/speed/accelerator.py: 8-GPU programs on one device (mocked collectives), and
  the time model's prediction of them where the report has it."""
  rows = [_mock_row(r) for r in report["sections"]["mock_multi_gpu"]["result"]]
  headers = ["config", "scheme", "mesh", "batch", "step ms (one device)", "MB per device",
             "gradient all-reduces overlapping compute",
             "predicted 8-GPU step ms (NVLink / 400 Gb/s NIC)"]
  if any(len(row) > len(headers) for row in rows):
    headers += ["time model ms: compute / whole step", "measured ÷ modelled compute"]
    rows = [row + [""] * (len(headers) - len(row)) for row in rows]
  return table(headers, rows)


# benchmarks/speed/accelerator.py: the datasheet description compile-only nodes are built from
# (speed/gpu_topologies.py) against what the GPU reports.
target_config = per_row(
    ("field", "{field}"), ("target config (datasheets)", "{target_config}"),
    ("this GPU reports", "{machine}"),
    ("same", lambda r: "—" if r["matches"] is None else ("yes" if r["matches"] else "no")),
    rows=_section("environment", "target_config_check"))


def suite(report) -> str:
  """benchmarks/speed/accelerator.py: the test suite under the machine's JAX, on CPU devices."""
  r = report["sections"]["suite"]["result"]
  text = table(["JAX", "Python", "pytest workers", "passed", "failed", "skipped", "seconds"],
               [[r["suite_jax"], r["suite_python"], r["workers"], r["suite_passed"],
                 r["suite_failed"], r["suite_skipped"], r["seconds"]]])
  skipped = [line.split("] ", 1)[-1] for line in r.get("skipped_tests", [])]
  text += "\n\nSkipped:\n" + "\n".join(f"- `{line}`" for line in skipped)
  if "failed_tests" in r:
    text += "\n\nFailed:\n" + "\n".join(f"- `{line}`" for line in r["failed_tests"])
  elif r["suite_failed"]:
    text += ("\n\nFailed: not named (that run's pytest summary listed skips only; the suite "
             "section now asks for failures too).")
  return text


def nvidia_smi_card(csv: str | None) -> dict:
  """{"memory.total [MiB]": "81559 MiB", ...} of `nvidia-smi --query-gpu=... --format=csv`'s
  header and one card's line; {} without them."""
  lines = (csv or "").strip().splitlines()
  if len(lines) != 2:
    return {}
  return dict(zip([h.strip() for h in lines[0].split(",")],
                  [v.strip() for v in lines[1].split(",")]))


def environment(report) -> str:
  """benchmarks/speed/accelerator.py: the machine, and the trainer and notebook runs on it."""
  env = report["sections"]["environment"]["result"]
  card = nvidia_smi_card(env.get("nvidia_smi"))
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
  if notebook and "notebook_platform" in notebook:
    final = notebook["final"]
    rows.append(("notebooks/colab.ipynb", f"on the {notebook['notebook_platform']}: "
                 f"{final['steps']} steps of {notebook['config']} ({final['model']}, batch "
                 f"{notebook['global_batch']}, {final['dtype']}), {notebook['images_per_sec']} "
                 f"images/s over the training cell ({notebook['train_cell_s']} s, compile and "
                 f"evaluations included), eval top-1 {percent(final['eval_top1'])}"))
  elif notebook and "final" in notebook:
    final = notebook["final"]
    rows.append(("notebooks/colab.ipynb", f"{final['steps']} steps of {final['model']} in "
                 f"{notebook['seconds']} s, eval top-1 {percent(final['eval_top1'])}"))
  return table(["", ""], rows)


# benchmarks/speed/accelerator.py: main.py against the bare step at the same settings.
trainer = per_row(
    ("model", "{model}"), ("dtype", "{dtype}"), ("batch", "{batch}"),
    ("main.py images/s (median)", "{trainer_images_per_sec}"),
    ("bare step images/s", "{step_images_per_sec}"), ("main.py ÷ step", "{trainer_vs_step}"),
    ("main.py ÷ pipelined step", lambda r: r.get("trainer_vs_pipelined_step", "—")),
    TRACED,
    ("steps", "{steps}"), ("wall-clock s", "{wall_clock_s}"), rows=_section("trainer"),
    optional=("main.py ÷ pipelined step", TRACED[0]))


def _tpu_row(r) -> list:
  where, versions = [r["topology"], r["config"], r["dtype"]], f"{r['jax']} / {r['libtpu']}"
  if not r["compiled"]:
    return [*where, "", f"no: {r['reason']}", *[""] * 5, versions]
  return [*where, f"{r['mesh'][0]}×{r['mesh'][1]}", "yes",
          f"{r['hbm_gib']} ({'yes' if r['hbm_fits'] else 'no'})", r["collective_mb"],
          r["analytic_mb"], f"{r['estimated_step_ms']} ({r['estimate']})",
          f"{r['estimated_images_per_sec']:,}", versions]


def tpu_compile(rows) -> str:
  """speed/tpu_compile.py: each config compiled for each TPU topology (nothing measured)."""
  return table(["topology", "config", "dtype", "mesh", "compiled", "HBM GiB per device (fits)",
                 "collective MB per device", "analytic minimum MB", "estimated step ms (from)",
                 "estimated images/s", "jax / libtpu"], map(_tpu_row, rows))


def _tpu_choice(r) -> list:
  where = [r["topology"], f"`{r['choice']}`", r["option"], r["model"]]
  if not r["compiled"]:
    return [*where, f"not compiled: {r['reason']}", ""]
  return [*where, f"{r['estimated_step_ms']} ({r['estimate']})", r["hbm_gib"]]


# The largest batch that fits (tpu_compile.py / gpu_compile.py --largest_batch); `gpu` leads
# the GPU rows.
_LARGEST = (("config", "{config}"),
            ("largest global batch that fits", lambda r: r["largest_global_batch"] or "none"),
            ("its HBM GiB", lambda r: r["hbm_gib"] or ""),
            ("the next batch", "{next_batch}: {next}"))


def tpu_choices(result) -> str:
  """benchmarks/speed/tpu_compile.py --choices / --largest_batch: estimates, nothing measured."""
  return (table(["topology", "choice", "option", "model", "estimated step ms (from)", "HBM GiB"],
                 map(_tpu_choice, result.get("choices", []))) + "\n\n" +
          per_row(("topology", "{topology}"), *_LARGEST)(result.get("largest_batch", [])))


def _gpu_row(r) -> list:
  where = [r["gpu"], r["topology"], r["config"], r["dtype"]]
  if not r["compiled"]:
    return [*where, "", f"no: {r['reason']}"] + [""] * 8
  return [*where, f"{r['mesh'][0]}×{r['mesh'][1]}",
          f"{r['hbm_gib']} ({'yes' if r['hbm_fits'] else 'no'})", r["collective_mb"],
          r["analytic_mb"], r["crossing_hosts_mb"],
          f"{r['async_overlapped']} of {r['async_collectives']} "
          f"({r['async_with_compute_in_flight']})", r["compute_ms"],
          r["exposed_comm_ms"], r["predicted_step_ms"], f"{r['predicted_images_per_sec']:,}"]


def gpu_compile(result) -> str:
  """speed/gpu_compile.py: each config compiled for each GPU node (nothing run on a GPU), in
  bfloat16, the dtype a GPU trains in (the float32 rows stay in the JSON)."""
  return table(["gpu", "topology", "config", "dtype", "mesh", "HBM GiB per GPU (fits 75%)",
                 "collective MB per GPU", "analytic minimum MB", "MB crossing hosts",
                 "async collectives beside a convolution or matmul (beside any compute)",
                 "compute ms", "exposed comm ms",
                 "predicted step ms", "predicted images/s"],
               map(_gpu_row, (r for r in result["rows"] if r["dtype"] == "bfloat16")))


# benchmarks/speed/gpu_compile.py: one node's predicted speed-ups beside Krizhevsky 2014's.
gpu_compile_ranking = per_row(
    ("gpu", "{gpu}"), ("config (8 GPUs, batch 1024)", "{config}"),
    ("predicted images/s", "{predicted_images_per_sec:,}"),
    ("predicted speed-up over 1 GPU at 128", "{predicted_speedup}"),
    ("the same, no overlap",  # none for owt (b)/(c): the pass model's overlap is structural.
     lambda r: "—" if r["speedup_without_overlap"] is None else r["speedup_without_overlap"]),
    ("Krizhevsky 2014, 8 K20s", lambda r: r["krizhevsky_speedup"] or "—"),
    rows=lambda result: result.get("ranking", []))

# benchmarks/speed/gpu_compile.py --largest_batch.
gpu_compile_largest = per_row(
    ("gpu", "{gpu}"), ("config", "{config}"),
    ("largest global batch that fits (bfloat16)", _LARGEST[1][1]), *_LARGEST[2:],
    rows=lambda result: result.get("largest_batch", []))


def report(result) -> str:
  """The whole report of benchmarks/speed/accelerator.py, section by section."""
  tables_by_section = {"single_device": single_device, "pytorch": pytorch, "profile": top_ops,
                       "tuning": tuning, "mock_multi_gpu": mock, "trainer": trainer,
                       "suite": suite}
  out = ["# Accelerator report" + (" (dry run: tiny sizes)" if result["dry_run"] else ""), ""]
  for name, section in result["sections"].items():
    out += [f"## {name} ({section.get('seconds', 0)} s)", ""]
    if "error" in section:
      out += ["```", section["error"].strip(), "```"]
    elif "skipped" in section or "skipped" in (section.get("result") or {}):
      out.append(f"Skipped: {section.get('skipped') or section['result']['skipped']}")
    elif name in tables_by_section:
      out.append(tables_by_section[name](result))
    else:
      out.append("```json\n" + json.dumps(section["result"], indent=1) + "\n```")
    out.append("")
  return "\n".join(out)


TABLES = {
    "tpu_compile": (tpu_compile, "tpu.json"),
    "tpu_choices": (tpu_choices, "tpu_choices.json"),
    "gpu_compile": (gpu_compile, "gpu_compile.json"),
    "gpu_compile_ranking": (gpu_compile_ranking, "gpu_compile.json"),
    "gpu_compile_largest": (gpu_compile_largest, "gpu_compile.json"),
    "gpu_environment": (environment, "gpu.json"),
    "gpu_single_device": (single_device, "gpu.json"),
    "gpu_pytorch": (pytorch, "gpu.json"),
    "gpu_top_ops": (top_ops, "gpu.json"),
    "gpu_tuning": (tuning, "gpu.json"),
    "gpu_h100_environment": (environment, "gpu_h100.json"),
    "gpu_h100_target_config": (target_config, "gpu_h100.json"),
    "gpu_h100_trainer": (trainer, "gpu_h100.json"),
    "gpu_h100_mock": (mock, "gpu_h100.json"),
    "gpu_h100_suite": (suite, "gpu_h100.json"),
}
