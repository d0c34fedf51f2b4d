r"""Every scheme compiled for TPU topologies on this machine (no TPU needed), as JSON rows.

  pip install -r requirements-test.txt     # with libtpu: compiles for TPUs without one
  python -m benchmarks.speed.tpu_compile [--topologies=v2:2x2,v5e:2x4] [--configs=hybrid4,owt8]
                                   [--dtypes=bfloat16,float32] [--out=DIR | --publish]

For each topology (jax.experimental.topologies: compile-only devices, as MaxText's
train_compile.py uses them), config and compute dtype, builds the config's real train step
(experiment.build on the topology's devices, abstract state, as train.py builds it) at the papers'
sizes (224², 1000 classes, the config's global batch), compiles it for TPU and records: whether it
compiled (or the one-sentence reason), HBM per core (arguments + temporaries + outputs − aliased,
XLA's memory analysis) against the core's HBM, the collective bytes each device sends read from
the TPU HLO (analysis/hlo_stats.py) against the analytic minimum (analysis/costmodel.py), and an
estimated step time: XLA's `optimal_seconds` where it is positive and not below the largest of
the floors (`costmodel.roofline_floors`: no TPU step was ever timed, so the time model has
nothing to calibrate a TPU on) — FLOPs ÷ the stated peak, and where the bandwidths are stated
bytes accessed ÷ HBM bandwidth (v4, v5e, v6e) and collective bytes ÷ one-way ICI bandwidth
(v5e, v6e) — else that floor (each row says which). Nothing here is measured on a TPU. Rows are merged into
tpu.json under runs/tpu_compile/ (or --out; docs/ with --publish) by (topology, config, dtype), so
a run may add to it.

  python -m benchmarks.speed.tpu_compile --choices --topologies=v2:2x2
  python -m benchmarks.speed.tpu_compile --largest_batch

--choices: each per-platform model choice (layers.MAX_POOLS, STEM_CONVS, GROUPED_CONVS) compiled
in the 1×1 `single` step, bfloat16, batch 256, and its estimated step time — what the "tpu"
entries of layers.*_BY_PLATFORM are chosen by (estimated, never measured). --largest_batch: the
largest power-of-two global batch whose step fits the device's HBM, for `single` and `owt8` in
bfloat16, searched from a guess scaled from tpu.json's row at the config's batch. Both run on
each topology given and go to tpu_choices.json, replacing that topology's earlier rows.
"""

import importlib.metadata
import json

import jax
from absl import app, flags

import benchmarks
from benchmarks.common import compile_only
from benchmarks.common.compile_only import CONFIGS
from benchmarks.speed.tpu_topologies import TOPOLOGIES, topology_devices
from hybrid_parallel import layers, platforms
from hybrid_parallel.analysis import costmodel


_TOPOLOGIES = benchmarks.define_choices("topologies", TOPOLOGIES, "TPU topologies to compile for.")
_CONFIGS = benchmarks.define_choices("configs", CONFIGS, compile_only.CONFIGS_HELP)
_DTYPES = flags.DEFINE_list("dtypes", ["bfloat16", "float32"], "Compute dtypes.")
_OUTPUT = benchmarks.define_output_flags("tpu_compile")  # tpu.json, rows merged into it.
_CHOICES = flags.DEFINE_bool("choices", False, "Estimate each per-platform model choice instead.")
_LARGEST = flags.DEFINE_bool("largest_batch", False, "Find the largest batch that fits instead.")


def compile_row(topology: str, name: str, dtype: str, *, devices, **overrides) -> dict:
  """One config compiled for one topology: the row described in the module docstring."""
  device = TOPOLOGIES[topology]
  config = compile_only.config(name, dtype, **overrides)
  row = {"topology": topology, "config": name, "dtype": dtype,
         "device_kind": devices[0].device_kind, "devices": len(devices),
         "global_batch": config.global_batch_size,
         # The compiler is libtpu's, and its choices (which collective, which layout) change
         # from release to release: every row says which compiled it.
         "jax": jax.__version__, "libtpu": importlib.metadata.version("libtpu")}
  try:
    step, compiled, compile_s = compile_only.compile_for(config, devices)
  except compile_only.NotCompiled as e:
    return {**row, "compiled": False, "reason": str(e)}
  plan, batch = step.run.plan, config.global_batch_size
  cost = compiled.cost_analysis() or {}
  facts = compile_only.program_facts(compiled, config=config, plan=plan)
  sent, hbm_bytes = facts["sent_bytes"], facts["hbm_bytes"]
  # cost_analysis counts one device's program; the time model's lower bounds on its time.
  floors = costmodel.roofline_floors(
      flops=cost.get("flops", 0.0), bytes_accessed=cost.get("bytes accessed", 0.0),
      bytes_sent=sent, peak_flops=device.peak_flops, hbm_bytes_per_s=device.hbm_bytes_per_s,
      link_bytes_per_s=device.ici_bytes_per_s)
  bound, floor_s = max(floors.items(), key=lambda item: item[1])
  optimal = cost.get("optimal_seconds")
  sane = optimal is not None and optimal > 0 and optimal >= floor_s
  step_s = optimal if sane else floor_s
  return {**row, "compiled": True, "compile_s": round(compile_s, 1),
          "mesh": [plan.data, plan.model], "hbm_gib": round(hbm_bytes / 2**30, 3),
          "hbm_fits": hbm_bytes <= device.hbm_bytes, "collective_mb": round(sent / 1e6, 2),
          "analytic_mb": round(facts["analytic_bytes"] / 1e6, 2),
          "xla_optimal_ms": None if optimal is None else round(1e3 * optimal, 2),
          "floors_ms": {name: round(1e3 * value, 3) for name, value in floors.items()},
          "estimated_step_ms": round(1e3 * step_s, 2),
          "estimate": "xla optimal_seconds" if sane else bound,
          "estimated_images_per_sec": round(batch / step_s) if step_s else None}


def model_choices(topology: str, devices) -> list[dict]:
  """Every implementation of each per-platform model choice, in the 1×1 step (--choices)."""
  rows = []
  for field, options, model in (("max_pool", layers.MAX_POOLS, "alexnet_owt"),
                                ("stem_conv", layers.STEM_CONVS, "alexnet_owt"),
                                ("grouped_conv", layers.GROUPED_CONVS, "alexnet")):
    for option in options:
      row = compile_row(topology, "single", "bfloat16", devices=devices, model=model,
                        **{field: option})
      rows.append({"choice": field, "option": option, "model": model, **row})
      print(json.dumps(rows[-1]), flush=True)
  return rows


def largest_batches(topology: str, devices, *, known: list[dict]) -> list[dict]:
  """The largest power-of-two global batch that compiles within HBM (--largest_batch), for
  `single` and `owt8` in bfloat16, from a guess scaled from tpu.json's row (`known`)."""
  def compile_batch(name, batch):
    row = compile_row(topology, name, "bfloat16", devices=devices, global_batch_size=batch)
    print(json.dumps(row), flush=True)
    return row

  return [{"topology": topology, **row} for row in compile_only.largest_batches(
      compile_batch, known=[r for r in known if r["topology"] == topology],
      capacity_bytes=TOPOLOGIES[topology].hbm_bytes)]


def _replace_topology(rows: list[dict], topology: str, new_rows: list[dict]) -> list[dict]:
  return [r for r in rows if r["topology"] != topology] + new_rows


def main(argv):
  del argv
  benchmarks.require_extra("tpu")  # libtpu compiles for TPU topologies, here without a TPU.
  platforms.start()  # before anything queries the devices.
  if _CHOICES.value or _LARGEST.value:
    path = _OUTPUT.path("tpu_choices.json")
    result = benchmarks.load_if_present(path, default={}) or {}
    known = benchmarks.load_if_present(_OUTPUT.path("tpu.json"))
    for topology in _TOPOLOGIES.value:
      devices = topology_devices(topology)
      if _CHOICES.value:
        result["choices"] = _replace_topology(result.get("choices", []), topology,
                                              model_choices(topology, devices))
      if _LARGEST.value:
        result["largest_batch"] = _replace_topology(
            result.get("largest_batch", []), topology,
            largest_batches(topology, devices, known=known))
      # After every topology: a long run keeps what it compiled.
      benchmarks.publish(result, path, software=("libtpu",))
    return
  path = _OUTPUT.path("tpu.json")
  chosen = {(t, c, d) for t in _TOPOLOGIES.value for c in _CONFIGS.value for d in _DTYPES.value}
  rows = [r for r in benchmarks.load_if_present(path)
          if (r["topology"], r["config"], r["dtype"]) not in chosen]
  for topology in _TOPOLOGIES.value:
    devices = topology_devices(topology)
    for name in _CONFIGS.value:
      for dtype in _DTYPES.value:
        rows.append(compile_row(topology, name, dtype, devices=devices))
        print(json.dumps(rows[-1]), flush=True)
        rows.sort(key=lambda r: (list(TOPOLOGIES).index(r["topology"]),
                                 CONFIGS.index(r["config"]), r["dtype"]))
        # After every row: a long run keeps what it compiled.
        benchmarks.publish(rows, path, software=("libtpu",))


if __name__ == "__main__":
  app.run(main)
