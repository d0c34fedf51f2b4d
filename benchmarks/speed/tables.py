"""The tables of how fast things run on this CPU (docs/performance.md,
docs/input_pipeline.md), from the JSON of benchmarks/speed/: throughput, pytorch_reference,
layer_choices (max_pool, grouped_conv), input_pipeline. The accelerators': accelerator_tables.py."""

from benchmarks import TRACED, mb, per_row, spread, table

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
  """benchmarks/speed/layer_choices.py: one grouped XLA convolution against one conv per column."""
  rows = [[f"alexnet {r['layer']}, forward + backward", tuple(r["input"]),
           r["feature_group_count_ms"], r["per_group_ms"], r["speedup"]] for r in result["layers"]]
  rows += [[f"{r['model']} single-device training step",
            f"({r['batch']}, {r['image_size']}, {r['image_size']}, 3)",
            r["feature_group_count_step_ms"], r["per_group_step_ms"], r["speedup"]]
           for r in result["steps"]]
  return table(["what", "input", "feature_group_count ms", "per_group ms", "speed-up"], rows)

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
    rows.append(["on the machine's first device: crop 224, flip, lighting, normalise", "", "",
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


# main.py fed by the prepared formats against the bare step, in one call (a GPU machine's host).
input_pipeline_trainer = per_row(
    ("source", "{source}"), ("decoding on", lambda r: f"{r['input_workers']} worker processes"
                             if r["input_workers"] else "a thread per core"),
    ("model", "{model}, {dtype}, {image_size}²"), ("batch", "{batch}"),
    ("main.py images/s (median)", "{trainer_images_per_sec:,.0f}"),
    ("bare step images/s", "{step_images_per_sec:,.0f}"), ("main.py ÷ step", "{trainer_vs_step}"),
    TRACED, rows=lambda result: result["trainer"], optional=(TRACED[0],))


def _gpu_host(render):
  """A table of input_pipeline.json's `gpu_host` rows (written there by --under=gpu_host)."""
  return lambda result: render(result["gpu_host"])


TABLES = {"throughput": (throughput, "throughput.json"),
          "pytorch_reference": (pytorch_reference,
                                ("pytorch_reference.json", "pytorch_reference_untuned.json")),
          "max_pool": (max_pool, "max_pool.json"),
          "grouped_conv": (grouped_conv, "grouped_conv.json"),
          "input_pipeline": (input_pipeline, "input_pipeline.json"),
          "input_pipeline_prepare": (input_pipeline_prepare, "input_pipeline.json"),
          "input_pipeline_gpu_host": (_gpu_host(input_pipeline), "input_pipeline.json"),
          "input_pipeline_gpu_host_prepare": (_gpu_host(input_pipeline_prepare),
                                              "input_pipeline.json"),
          "input_pipeline_gpu_host_trainer": (_gpu_host(input_pipeline_trainer),
                                              "input_pipeline.json")}
