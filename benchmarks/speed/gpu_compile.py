r"""Every scheme compiled for 8-GPU NVIDIA nodes on this machine (no GPU needed), as JSON rows.

  pip install -r requirements-cuda13.txt     # JAX's CUDA plugin compiles for GPUs without one
  python -m benchmarks.speed.gpu_compile [--gpus=h100,h200] [--topologies=1x1x8,1x2x8]
                                   [--configs=hybrid4,owt8] [--dtypes=bfloat16,float32]
  python -m benchmarks.speed.gpu_compile --largest_batch
  python -m benchmarks.speed.gpu_compile --dry_run  # alexnet_tiny at 64² on one H100 node: prints rows

For each GPU (benchmarks/speed/gpu_topologies.py: H100 and H200 SXM, described from their datasheets),
topology, config and compute dtype, builds the config's real train step on the topology's
compile-only devices (experiment.lower_train_step, the step train.py runs) at the papers' sizes
(224², 1000 classes) and reads the compiled XLA:GPU program back:

- HBM per GPU (XLA's memory analysis: arguments + temporaries + outputs − aliased) and whether it
  fits the 75% of the GPU's memory that JAX takes by default (XLA_PYTHON_CLIENT_MEM_FRACTION);
- the collective bytes each device sends (analysis/hlo_stats.py) against the analytic minimum
  (analysis/costmodel.py), and which of them cross hosts;
- the collectives XLA made asynchronous and the compute ops scheduled while each is in flight
  (the scheduled HLO: hlo_stats.async_collectives);
- a predicted step: compute + exposed communication + whatever overlapped communication outlasts
  the compute. Compute is the one-GPU step measured on an H200 (docs/gpu.json's bare step, the
  same model or the two-column alexnet, the dtype, the batch nearest the device's share) scaled
  to the device's FLOPs; an H100 has the same processor, so its rows assume the same rate (an
  H100 is up to 1.4× slower where the step is memory-bound: its HBM is 3.35 TB/s, not 4.8).
  Communication is each collective's bytes at the node's NVLink all-reduce bus bandwidth, or at
  the per-GPU 400 Gb/s NIC where its groups cross hosts; a collective with compute in flight is
  counted as overlapped, the rest as exposed.

`1x1x8` is one node; on `1x2x8` (two nodes of eight) each config's data axis doubles across the
nodes, and its batches with it (`single` becomes data 2×1): each node holds the config's mesh,
and the data axis crosses the hosts (`model2` keeps its 1×2 mesh, one GPU on each node: its model
axis crosses them). Rows are merged into --out/gpu_compile.json by (gpu,
topology, config, dtype). --largest_batch: the largest power-of-two global batch of `single` and
`owt8` in bfloat16 that fits one node's GPUs, into gpu_compile.json's `largest_batch`.
Nothing here runs on a GPU.
"""

import json
import os
import time

from absl import app, flags

import benchmarks
from benchmarks.common import compile_only
from benchmarks.common.compile_only import CONFIGS as COMPILED_CONFIGS
from hybrid_parallel import platforms
from benchmarks.speed import gpu_topologies
from benchmarks.speed.gpu_topologies import GPUS, TOPOLOGIES

# docs/gpu.json's one-GPU rows (H200, JAX 0.11.2, 2026-11-23): the compute rate of the predictions.
MEASURED = os.path.join(benchmarks.DOCS, "gpu.json")
# JAX takes this share of a GPU's memory for XLA unless XLA_PYTHON_CLIENT_MEM_FRACTION says more.
JAX_MEMORY_FRACTION = 0.75
# Krizhevsky 2014's 8 K20s (Table 1, as secondary sources quote it), speed-up over one GPU at
# batch 128: (conv batch, FC batch) (1024, 1024) and the variable batch (1024, 128).
KRIZHEVSKY_8_GPUS = {"(1024, 1024)": 6.25, "(1024, 128)": 6.16}
# And data parallelism on the same 8 GPUs, network and batch, for the ranking.
CONFIGS = (*COMPILED_CONFIGS, "data8")

_GPUS = flags.DEFINE_list("gpus", list(GPUS), "GPUs to compile for.")
_TOPOLOGIES = flags.DEFINE_list("topologies", list(TOPOLOGIES),
                                "slices x hosts x GPUs per host.")
_CONFIGS = flags.DEFINE_list("configs", list(CONFIGS), "Configs (NAME, or owt8:b / owt8:c for "
                             "Krizhevsky's FC passes).")
_DTYPES = flags.DEFINE_list("dtypes", ["bfloat16", "float32"], "Compute dtypes.")
_OUT = flags.DEFINE_string("out", benchmarks.DOCS, "Where gpu_compile.json goes (rows merged in).")
_LARGEST = flags.DEFINE_bool("largest_batch", False, "Find the largest batch that fits instead.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "alexnet_tiny's hybrid 2×2 step at 64² on one H100 "
                             "node: print its row, write nothing.")
flags.register_validator("gpus", lambda names: set(names) <= set(GPUS),
                         message=f"--gpus: choose from {', '.join(GPUS)}.")
flags.register_validator("topologies", lambda names: set(names) <= set(TOPOLOGIES),
                         message=f"--topologies: choose from {', '.join(TOPOLOGIES)}.")
flags.register_validator("configs", lambda names: set(names) <= set(CONFIGS),
                         message=f"--configs: choose from {', '.join(CONFIGS)}.")


def _spread_over_hosts(config, topology: str):
  """On two nodes the data axis doubles across them, and the batches with it; the model scheme,
  which has no data axis (and alexnet's two columns no wider model axis), keeps its 1×2 mesh
  with one GPU on each node."""
  if topology == "1x1x8" or config.parallelism == "model":
    return config
  config.mesh.data *= 2
  config.global_batch_size *= 2
  config.eval_batch_size *= 2
  if config.parallelism == "single":
    config.parallelism = "data"
  return config


def compute_rate(model: str, dtype: str, *, per_device_images: float, measured: list[dict]):
  """FLOP/s of the measured one-GPU step nearest this one, and which row it is."""
  rows = [r for r in measured if r["dtype"] == dtype and
          r["model"] == (model if any(m["model"] == model for m in measured) else "alexnet")]
  row = min(rows, key=lambda r: abs(r["batch"] - per_device_images))
  return (row["flops_per_image"] * row["images_per_sec"],
          f"H200 {row['model']} {row['dtype']} batch {row['batch']}")


def predict(ops, async_ops, *, mesh, gpu, compute_s: float) -> dict:
  """The step from the compute and the program's collectives (module docstring)."""
  overlapped = {c.name for c in async_ops if c.compute_ops_in_flight > 0}
  exposed_s = overlapped_s = 0.0
  crossing_bytes = 0.0
  for op in ops:
    crosses = gpu_topologies.crosses_hosts(op, mesh)
    sent = sum(op.sent) / len(op.sent)
    crossing_bytes += sent if crosses else 0.0
    seconds = sent / (gpu.nic_bytes_per_s if crosses else gpu.nvlink_bus_bytes_per_s)
    if op.name in overlapped:
      overlapped_s += seconds
    else:
      exposed_s += seconds
  step_s = compute_s + exposed_s + max(0.0, overlapped_s - compute_s)
  return {"compute_ms": round(1e3 * compute_s, 3), "exposed_comm_ms": round(1e3 * exposed_s, 3),
          "overlapped_comm_ms": round(1e3 * overlapped_s, 3),
          "crossing_hosts_mb": round(crossing_bytes / 1e6, 2),
          "predicted_step_ms": round(1e3 * step_s, 3)}


def compile_row(gpu: str, topology: str, name: str, *, dtype: str, devices, measured,
                **overrides) -> dict:
  """One config compiled for one GPU topology: the row described in the module docstring."""
  import jax
  import experiment
  from hybrid_parallel import models
  from hybrid_parallel.analysis import costmodel, hlo_stats
  from hybrid_parallel.errors import UserError

  config = _spread_over_hosts(compile_only.config(name, dtype, **overrides), topology)
  row = {"gpu": gpu, "topology": topology, "config": name, "dtype": dtype,
         "device_kind": devices[0].device_kind, "global_batch": config.global_batch_size,
         "mesh": [config.mesh.data, config.mesh.model], "jax": jax.__version__}
  try:
    step = experiment.lower_train_step(
        experiment.resolve(config), num_classes=compile_only.NUM_CLASSES,
        devices=gpu_topologies.mesh_devices(devices, config.mesh.data, config.mesh.model))
  except (UserError, ValueError) as e:
    return {**row, "compiled": False, "reason": " ".join(str(e).split())[:300]}
  start = time.perf_counter()
  try:
    compiled = step.lowered.compile()
  except Exception as e:  # noqa: BLE001 — XLA's reason (out of memory, say) is the row's result.
    return {**row, "compiled": False, "reason": " ".join(str(e).split())[:300]}
  compile_s = time.perf_counter() - start
  plan, mesh = step.run.plan, step.run.mesh
  facts = compile_only.program_facts(compiled, config=config, plan=plan)
  hlo = compiled.as_text()
  async_ops = hlo_stats.async_collectives(hlo)
  flops = costmodel.training_flops_per_image(models.ARCHITECTURES[config.model],
                                             config.image_size, compile_only.NUM_CLASSES)
  devices_used = plan.data * plan.model
  rate, rate_from = compute_rate(config.model, dtype, measured=measured,
                                 per_device_images=config.global_batch_size / devices_used)
  prediction = predict(hlo_stats.collectives(hlo, devices_used), async_ops, mesh=mesh,
                       gpu=GPUS[gpu], compute_s=flops * config.global_batch_size
                       / devices_used / rate)
  capacity = JAX_MEMORY_FRACTION * GPUS[gpu].memory_bytes
  return {**row, "compiled": True, "compile_s": round(compile_s, 1), "devices": devices_used,
          "hosts": len({d.process_index for d in mesh.devices.flat}),
          "axes_crossing_hosts": gpu_topologies.axes_crossing_hosts(mesh),
          "hbm_gib": round(facts["hbm_bytes"] / 2**30, 3),
          "hbm_fits": facts["hbm_bytes"] <= capacity,
          "collective_mb": round(facts["sent_bytes"] / 1e6, 2),
          "analytic_mb": round(facts["analytic_bytes"] / 1e6, 2),
          "async_collectives": len(async_ops),
          "async_with_compute_in_flight": sum(c.compute_ops_in_flight > 0 for c in async_ops),
          "async": [{"kind": c.kind, "mb": round(c.bytes / 1e6, 3),
                     "compute_ops_in_flight": c.compute_ops_in_flight} for c in async_ops],
          "compute_from": rate_from, **prediction,
          "predicted_images_per_sec": round(1e3 * config.global_batch_size
                                            / prediction["predicted_step_ms"])}


def ranking(rows: list[dict]) -> list[dict]:
  """Predicted speed-ups on one 8-GPU node over one GPU at batch 128 (bfloat16, alexnet_owt, as
  measured), beside Krizhevsky 2014's on 8 K20s: owt8's (a), (b), (c) and data-parallel 8×1."""
  result = []
  measured = _measured()
  for gpu in GPUS:
    base = next(r for r in measured if (r["model"], r["dtype"], r["batch"]) ==
                ("alexnet_owt", "bfloat16", 128))["images_per_sec"]
    for name, paper in (("owt8", "(1024, 1024)"), ("owt8:b", "(1024, 1024)"),
                        ("owt8:c", "(1024, 1024)"), ("data8", None)):
      row = next((r for r in rows if (r["gpu"], r["topology"], r["config"], r["dtype"]) ==
                  (gpu, "1x1x8", name, "bfloat16") and r["compiled"]), None)
      if row:
        serial_ms = row["compute_ms"] + row["exposed_comm_ms"] + row["overlapped_comm_ms"]
        result.append({"gpu": gpu, "config": name,
                       "predicted_images_per_sec": row["predicted_images_per_sec"],
                       "predicted_speedup": round(row["predicted_images_per_sec"] / base, 2),
                       # The same step if no transfer overlapped the compute.
                       "speedup_without_overlap": round(
                           1e3 * row["global_batch"] / serial_ms / base, 2),
                       "krizhevsky_speedup": KRIZHEVSKY_8_GPUS.get(paper)})
  return result


def _measured() -> list[dict]:
  with open(MEASURED) as f:
    return json.load(f)["sections"]["single_device"]["result"]


def largest_batches(gpu: str, devices, *, known: list[dict], measured) -> list[dict]:
  """The largest power-of-two global batch of `single` and `owt8` (bfloat16) whose step fits
  one node's GPUs, searched from a guess scaled from gpu_compile.json's row (`known`)."""
  def attempt(name, batch):
    row = compile_row(gpu, "1x1x8", name, dtype="bfloat16", devices=devices,
                      measured=measured, global_batch_size=batch)
    print(json.dumps({k: v for k, v in row.items() if k != "async"}), flush=True)
    return row, row["compiled"] and row["hbm_fits"]

  rows = []
  for name in ("single", "owt8"):
    row = next((r for r in known if (r["gpu"], r["topology"], r["config"], r["dtype"]) ==
                (gpu, "1x1x8", name, "bfloat16")), None)
    first = compile_only.first_guess(compile_only.config(name, "bfloat16").global_batch_size,
                                     known=row, capacity_bytes=JAX_MEMORY_FRACTION
                                     * GPUS[gpu].memory_bytes)
    rows.append({"gpu": gpu, "config": name,
                 **compile_only.largest_batch(lambda batch, name=name: attempt(name, batch),
                                              first)})
  return rows


def main(argv):
  del argv
  # No GPU to tune kernels on: XLA's sharded autotuning can hang a compile-only program
  # (openxla/xla#28959; MaxText's train_compile.py turns it off too).
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_gpu_shard_autotuning=false").strip()
  platforms.start()  # before anything queries the devices.
  reason = gpu_topologies.unavailable_reason()
  if reason:
    raise SystemExit(f"error: {reason}.")
  measured = _measured()
  if _DRY_RUN.value:
    devices = gpu_topologies.topology_devices("h100", "1x1x8")
    row = compile_row("h100", "1x1x8", "hybrid4", dtype="bfloat16", devices=devices,
                      measured=measured, model="alexnet_tiny", image_size=64)
    print(json.dumps(row))
    return
  path = os.path.join(_OUT.value, "gpu_compile.json")
  result = benchmarks.load_if_present(path, default={}) or {}
  if _LARGEST.value:
    result["largest_batch"] = [r for r in result.get("largest_batch", [])
                               if r["gpu"] not in _GPUS.value]
    for gpu in _GPUS.value:
      result["largest_batch"] += largest_batches(
          gpu, gpu_topologies.topology_devices(gpu, "1x1x8"), known=result.get("rows", []),
          measured=measured)
      benchmarks.publish(result, path)
    return
  chosen = {(g, t, c, d) for g in _GPUS.value for t in _TOPOLOGIES.value
            for c in _CONFIGS.value for d in _DTYPES.value}
  rows = [r for r in result.get("rows", [])
          if (r["gpu"], r["topology"], r["config"], r["dtype"]) not in chosen]
  order = lambda r: (list(GPUS).index(r["gpu"]), TOPOLOGIES.index(r["topology"]),  # noqa: E731
                     CONFIGS.index(r["config"]), r["dtype"])
  for gpu in _GPUS.value:
    for topology in _TOPOLOGIES.value:
      devices = gpu_topologies.topology_devices(gpu, topology)
      for name in _CONFIGS.value:
        for dtype in _DTYPES.value:
          rows.append(compile_row(gpu, topology, name, dtype=dtype, devices=devices,
                                  measured=measured))
          print(json.dumps({k: v for k, v in rows[-1].items() if k != "async"}), flush=True)
          result.update(date=time.strftime("%Y-%m-%d"), rows=sorted(rows, key=order))
          result["ranking"] = ranking(result["rows"])
          benchmarks.publish(result, path)  # after every row: a long run keeps what it compiled.


if __name__ == "__main__":
  app.run(main)
