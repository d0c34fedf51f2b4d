r"""Every scheme compiled for 8-GPU NVIDIA nodes on this machine (no GPU needed), as JSON rows.

  pip install -r requirements-cuda13.txt     # JAX's CUDA plugin compiles for GPUs without one
  python -m benchmarks.speed.gpu_compile [--gpus=h100,h200] [--topologies=1x1x8,1x2x8]
                                   [--configs=hybrid4,owt8] [--dtypes=bfloat16,float32]
  python -m benchmarks.speed.gpu_compile --largest_batch
  python -m benchmarks.speed.gpu_compile --dry_run  # alexnet_tiny, 64², one H100 node: a row

For each GPU (speed/gpu_topologies.py: H100 and H200 SXM, described from their datasheets),
topology, config and compute dtype, builds the config's real train step on the topology's
compile-only devices (experiment.lower_train_step, the step train.py runs) at the papers' sizes
(224², 1000 classes) and reads the compiled XLA:GPU program back:

- HBM per GPU (XLA's memory analysis: arguments + temporaries + outputs − aliased) and whether it
  fits the 75% of the GPU's memory that JAX takes by default (XLA_PYTHON_CLIENT_MEM_FRACTION);
- the collective bytes each device sends (analysis/hlo_stats.py) against the analytic minimum
  (analysis/costmodel.py), and which of them cross hosts;
- the collectives XLA made asynchronous and the compute ops scheduled while each is in flight
  (the scheduled HLO: hlo_stats.async_collectives);
- a predicted step, through the one time model (analysis/costmodel.py): compute from the device's
  FLOPs at the one-GPU curve measured on an H200 (docs/gpu.json's bare step, the same model or
  the two-column alexnet, the dtype: a fixed time per step and a share of the peak, from its
  batch-128 and batch-512 points; an H100 has the same processor, so its rows assume the same
  curve — up to 1.4× slower where the step is memory-bound: its HBM is 3.35 TB/s, not 4.8);
  each compiled collective's bytes at the node's NVLink all-reduce bus bandwidth, or at the
  per-GPU 400 Gb/s NIC where its groups cross hosts (analysis/hardware.py); a collective with
  a convolution or matrix product in flight (hlo_stats.overlapped) costs what outlasts the
  compute, the rest is exposed: one beside elementwise fusions alone hides nothing. owt's (b)
  and (c) (owt8:b, owt8:c) are priced by the time model's FC passes on their analytic transfers
  (gpu_topologies.time_model_transfers), every gradient sum exposed.

`1x1x8` is one node; on `1x2x8` (two nodes of eight) each config's data axis doubles across the
nodes, and its batches with it (`single` becomes data 2×1): each node holds the config's mesh,
and the data axis crosses the hosts (`model2` keeps its 1×2 mesh, one GPU on each node: its model
axis crosses them). Rows are merged into gpu_compile.json under runs/gpu_compile/ (or --out; docs/ with --publish) by (gpu,
topology, config, dtype). --largest_batch: the largest power-of-two global batch of `single` and
`owt8` in bfloat16 that fits one node's GPUs, into gpu_compile.json's `largest_batch`.
Nothing here runs on a GPU.
"""

import json
import time

import jax
from absl import app, flags

import benchmarks
from benchmarks.common import compile_only
from benchmarks.common.compile_only import CONFIGS as COMPILED_CONFIGS
from benchmarks.speed import gpu_topologies
from benchmarks.speed.gpu_topologies import GPUS, STUDIED, TOPOLOGIES
from hybrid_parallel import models, partitioning, platforms
from hybrid_parallel.analysis import costmodel, hlo_stats

# Krizhevsky 2014's 8 K20s (Table 1, as secondary sources quote it), speed-up over one GPU at
# batch 128: (conv batch, FC batch) (1024, 1024) and the variable batch (1024, 128).
KRIZHEVSKY_8_GPUS = {"(1024, 1024)": 6.25, "(1024, 128)": 6.16}
# And data parallelism on the same 8 GPUs, network and batch, for the ranking.
CONFIGS = (*COMPILED_CONFIGS, "data8")

_GPUS = benchmarks.define_choices("gpus", STUDIED, "GPUs to compile for.")
_TOPOLOGIES = benchmarks.define_choices("topologies", TOPOLOGIES,
                                        "slices x hosts x GPUs per host.")
_CONFIGS = benchmarks.define_choices("configs", CONFIGS, compile_only.CONFIGS_HELP)
_DTYPES = flags.DEFINE_list("dtypes", ["bfloat16", "float32"], "Compute dtypes.")
_OUTPUT = benchmarks.define_output_flags("gpu_compile")  # gpu_compile.json, rows merged in.
_LARGEST = flags.DEFINE_bool("largest_batch", False, "Find the largest batch that fits instead.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "alexnet_tiny's hybrid 2×2 step at 64² on one H100 "
                             "node: print its row, write nothing.")


def _spread_over_hosts(config, topology: str):
  """On two nodes the data axis doubles across them, and the batches with it; the model scheme,
  which has no data axis (and alexnet's two columns no wider model axis), keeps its 1×2 mesh
  with one GPU on each node."""
  meshes = partitioning.SCHEMES[config.parallelism].mesh
  if topology == "1x1x8" or meshes == "1×M":
    return config
  config.mesh.data *= 2
  config.global_batch_size *= 2
  config.eval_batch_size *= 2
  if meshes == "1×1":  # one device a node: data parallelism across them.
    config.parallelism = "data"
  return config


def predict(hlo: str, *, mesh, machine, arch, plan, config) -> dict:
  """The step through the time model (costmodel.step_time) on the transfers it prices for the
  compiled program (gpu_topologies.time_model_transfers). `exposed_comm_ms` is what the model
  adds to the compute, `overlapped_comm_ms` what of the transfers' time it hides — None for owt's
  (b)/(c) passes, whose overlap is the pass model's structure, not a transfer's flag."""
  transfers = gpu_topologies.time_model_transfers(
      hlo, mesh=mesh, plan=plan, arch=arch, global_batch=config.global_batch_size,
      image_size=config.image_size, num_classes=compile_only.NUM_CLASSES, dtype=config.dtype,
      owt_variant=config.owt_variant)
  t = costmodel.step_time(arch, plan, machine, global_batch=config.global_batch_size,
                          image_size=config.image_size, num_classes=compile_only.NUM_CLASSES,
                          dtype=config.dtype, transfers=transfers,
                          owt_variant=config.owt_variant,
                          fc_updates_per_step=config.fc_updates_per_step)
  serial = sum(costmodel.transfer_time(x, machine) for x in transfers)
  passes = costmodel.prices_owt_passes(plan, config.owt_variant)
  return {"compute_ms": round(1e3 * t["compute_s"], 3),
          "exposed_comm_ms": round(1e3 * t["communication_s"], 3),
          "overlapped_comm_ms": None if passes else round(
              1e3 * (serial - t["communication_s"]), 3),
          "crossing_hosts_mb": round(sum(costmodel.bytes_sent(x) for x in transfers
                                         if x.crosses_nodes) / 1e6, 2),
          "predicted_step_ms": round(1e3 * t["step_s"], 3)}


def compile_row(gpu: str, topology: str, name: str, *, dtype: str, devices, measured,
                **overrides) -> dict:
  """One config compiled for one GPU topology: the row described in the module docstring."""
  config = _spread_over_hosts(compile_only.config(name, dtype, **overrides), topology)
  row = {"gpu": gpu, "topology": topology, "config": name, "dtype": dtype,
         "device_kind": devices[0].device_kind, "global_batch": config.global_batch_size,
         "mesh": [config.mesh.data, config.mesh.model], "jax": jax.__version__}
  try:
    step, compiled, compile_s = compile_only.compile_for(
        config, gpu_topologies.mesh_devices(devices, config.mesh.data, config.mesh.model))
  except compile_only.NotCompiled as e:
    return {**row, "compiled": False, "reason": str(e)}
  plan, mesh = step.run.plan, step.run.mesh
  facts = compile_only.program_facts(compiled, config=config, plan=plan)
  hlo = compiled.as_text()
  async_ops = hlo_stats.async_collectives(hlo)
  overlapped = hlo_stats.overlapped(hlo)
  machine = gpu_topologies.calibrated_node(gpu, topology, model=config.model, dtype=dtype,
                                           measured=measured)
  prediction = predict(hlo, mesh=mesh,
                       machine=machine, arch=models.ARCHITECTURES[config.model], plan=plan,
                       config=config)
  capacity = gpu_topologies.JAX_MEMORY_FRACTION * GPUS[gpu].memory_bytes
  return {**row, "compiled": True, "compile_s": round(compile_s, 1),
          "devices": plan.data * plan.model,
          "hosts": len({d.process_index for d in mesh.devices.flat}),
          "axes_crossing_hosts": gpu_topologies.axes_crossing_hosts(mesh),
          "hbm_gib": round(facts["hbm_bytes"] / 2**30, 3),
          "hbm_fits": facts["hbm_bytes"] <= capacity,
          "collective_mb": round(facts["sent_bytes"] / 1e6, 2),
          "analytic_mb": round(facts["analytic_bytes"] / 1e6, 2),
          "async_collectives": len(async_ops),
          "async_with_compute_in_flight": sum(c.compute_ops_in_flight > 0 for c in async_ops),
          "async_overlapped": len(overlapped),
          "async": [{"kind": c.kind, "mb": round(c.bytes / 1e6, 3),
                     "compute_ops_in_flight": c.compute_ops_in_flight,
                     "convolutions_and_matmuls_in_flight": c.heavy_ops_in_flight}
                    for c in async_ops],
          "compute_from": machine.calibrated_from, **prediction,
          "predicted_images_per_sec": round(1e3 * config.global_batch_size
                                            / prediction["predicted_step_ms"])}


def ranking(rows: list[dict]) -> list[dict]:
  """Predicted speed-ups on one 8-GPU node over one GPU at batch 128 (bfloat16, alexnet_owt, as
  measured), beside Krizhevsky 2014's on 8 K20s: owt8's (a), (b), (c) and data-parallel 8×1."""
  result = []
  measured = gpu_topologies.one_gpu_rows()
  for gpu in STUDIED:
    base = next(r for r in measured if (r["model"], r["dtype"], r["batch"]) ==
                ("alexnet_owt", "bfloat16", 128))["images_per_sec"]
    for name, paper in (("owt8", "(1024, 1024)"), ("owt8:b", "(1024, 1024)"),
                        ("owt8:c", "(1024, 1024)"), ("data8", None)):
      row = next((r for r in rows if (r["gpu"], r["topology"], r["config"], r["dtype"]) ==
                  (gpu, "1x1x8", name, "bfloat16") and r["compiled"]), None)
      if row:
        hidden = row["overlapped_comm_ms"]  # None: the pass model's (b)/(c), no such figure.
        serial_ms = None if hidden is None else row["compute_ms"] + row["exposed_comm_ms"] + hidden
        result.append({"gpu": gpu, "config": name,
                       "predicted_images_per_sec": row["predicted_images_per_sec"],
                       "predicted_speedup": round(row["predicted_images_per_sec"] / base, 2),
                       # The same step if no transfer overlapped the compute.
                       "speedup_without_overlap": None if serial_ms is None else round(
                           1e3 * row["global_batch"] / serial_ms / base, 2),
                       "krizhevsky_speedup": KRIZHEVSKY_8_GPUS.get(paper)})
  return result


def largest_batches(gpu: str, devices, *, known: list[dict], measured) -> list[dict]:
  """The largest power-of-two global batch of `single` and `owt8` (bfloat16) whose step fits
  one node's GPUs, searched from a guess scaled from gpu_compile.json's row (`known`)."""
  def compile_batch(name, batch):
    row = compile_row(gpu, "1x1x8", name, dtype="bfloat16", devices=devices,
                      measured=measured, global_batch_size=batch)
    print(json.dumps({k: v for k, v in row.items() if k != "async"}), flush=True)
    return row

  return [{"gpu": gpu, **row} for row in compile_only.largest_batches(
      compile_batch, known=[r for r in known if (r["gpu"], r["topology"]) == (gpu, "1x1x8")],
      capacity_bytes=gpu_topologies.JAX_MEMORY_FRACTION * GPUS[gpu].memory_bytes)]


def main(argv):
  del argv
  gpu_topologies.without_sharded_autotuning()
  platforms.start()  # before anything queries the devices.
  reason = gpu_topologies.unavailable_reason()
  if reason:
    raise SystemExit(f"error: {reason}.")
  measured = gpu_topologies.one_gpu_rows()
  if _DRY_RUN.value:
    devices = gpu_topologies.topology_devices("h100", "1x1x8")
    row = compile_row("h100", "1x1x8", "hybrid4", dtype="bfloat16", devices=devices,
                      measured=measured, model="alexnet_tiny", image_size=64)
    print(json.dumps(row))
    return
  path = _OUTPUT.path("gpu_compile.json")
  result = benchmarks.load_if_present(path, default={}) or {}
  if _LARGEST.value:
    result["largest_batch"] = [r for r in result.get("largest_batch", [])
                               if r["gpu"] not in _GPUS.value]
    for gpu in _GPUS.value:
      result["largest_batch"] += largest_batches(
          gpu, gpu_topologies.topology_devices(gpu, "1x1x8"), known=result.get("rows", []),
          measured=measured)
      benchmarks.publish(result, path, software=platforms.CUDA_PLUGINS)
    return
  chosen = {(g, t, c, d) for g in _GPUS.value for t in _TOPOLOGIES.value
            for c in _CONFIGS.value for d in _DTYPES.value}
  rows = [r for r in result.get("rows", [])
          if (r["gpu"], r["topology"], r["config"], r["dtype"]) not in chosen]
  order = lambda r: (STUDIED.index(r["gpu"]), TOPOLOGIES.index(r["topology"]),  # noqa: E731
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
          # After every row: a long run keeps what it compiled.
          benchmarks.publish(result, path, software=platforms.CUDA_PLUGINS)


if __name__ == "__main__":
  app.run(main)
