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


# The decoded format (`prepare --format=decoded`) in each colour layout, and ImageNet's train split.
input_pipeline_decoded_prepare = per_row(
    ("colour", lambda p: {"yuv420": "YUV 4:2:0", "rgb": "RGB"}[p["colour"]] + f", {p['size']}²"),
    ("bytes per image", "{bytes_per_image:,}"),
    ("prepare images/s per core", "{images_per_sec_per_core:,.0f}"),
    ("images/s, 1 worker · 2 workers", lambda p: " · ".join(
        f"{p['images_per_sec_by_workers'][w]:,.0f}" for w in ("1", "2"))
     if "images_per_sec_by_workers" in p else "—"),
    ("of it the colour layout, ms", "{layout_ms_per_image:.2f}"),
    ("ImageNet train set", "{imagenet_train_gb:,.1f} GB ({imagenet_train_gib:,.1f} GiB)"),
    ("ImageNet core-hours", "{imagenet_core_hours:,.1f}"),
    ("PSNR against RGB", lambda p: f"{p['psnr_vs_rgb_db']} dB" if "psnr_vs_rgb_db" in p else "—"),
    rows=lambda result: result["decoded"]["decoded_prepare"],
    optional=("images/s, 1 worker · 2 workers",))


def _decoded_rate(row) -> str:
  rate = row.get("device_images_per_sec", row.get("images_per_sec_median"))
  return f"{rate:,.0f}"


# The decoded set read: on the first device (gather + convert + augment) and on host threads.
_decoded_reads = per_row(
    ("source", "{source}"), ("where", lambda r: "on the device" if r["placement"] == "devices"
                             else f"host, {r['threads']} thread" + "s" * (r["threads"] > 1)),
    ("work per batch", lambda r: r.get("device_work") or r["host_work"]),
    ("images/s (median)", _decoded_rate),
    ("time ÷ the bare step's", lambda r: f"{r['finish_over_bare_step']:.2f} of "
     f"{r['bare_step_ms_pipelined']:,.1f} ms" if "finish_over_bare_step" in r else "—"),
    rows=lambda result: [r for r in result["decoded"]["decoded"] if r["placement"] != "transfer"],
    optional=("time ÷ the bare step's",))


def input_pipeline_decoded(result) -> str:
  """The decoded set's reads, then what a host→device transfer of its batches runs at."""
  moves = [r for r in result["decoded"]["decoded"] if r["placement"] == "transfer"]
  if not moves:  # a report made before transfers were timed
    return _decoded_reads(result)
  moves = moves[0]
  return _decoded_reads(result) + "\n\n" + table(
      ["host→device transfers of batches of YUV rows", "images/s"],
      [["one at a time", f"{moves['one_at_a_time_images_per_sec']:,.0f}"],
       ["four in flight", f"{moves['four_in_flight_images_per_sec']:,.0f}"],
       ["four in flight, staged in pinned host memory" + ("" if moves["pinned_host"] else
                                                          " (none here: the same transfers)"),
        f"{moves['four_in_flight_pinned_images_per_sec']:,.0f}"]])


def _vs(key):
  return lambda r: f"{r[key]:.3f}" if key in r else "—"


# main.py fed by each path against the pipelined bare step and against synthetic data.
input_pipeline_feeding = per_row(
    ("source", "{source}"), ("model", "{model}, {dtype}, {image_size}²"), ("batch", "{batch}"),
    ("main.py images/s (median)", lambda r: f"{r['trainer_images_per_sec']:,.0f}"
     if "trainer_images_per_sec" in r else r.get("skipped", "error")),
    ("÷ pipelined step", _vs("trainer_vs_pipelined_step")),
    ("÷ main.py on synthetic", _vs("trainer_vs_synthetic")),
    ("÷ JPEG ceiling", lambda r: f"{r['trainer_vs_jpeg_ceiling']:.3f} of "
     f"{r['jpeg_ceiling_images_per_sec']:,.0f}" if "trainer_vs_jpeg_ceiling" in r else "—"),
    TRACED, rows=lambda result: result["decoded"]["feeding"], optional=(TRACED[0],))


# The split placement's exchange, compiled for 8 devices (benchmarks/speed/split_exchange.py).
input_pipeline_split_exchange = per_row(
    ("devices", "{data}"), ("global batch", "{global_batch:,}"),
    ("rows a device owns, MB", lambda r: mb(r["owned_rows_bytes_per_device"])),
    ("all-to-all per device and round, MB", lambda r: mb(r["collective_bytes_per_device"])),
    ("÷ owned", "{collective_over_owned:.2f}"),
    ("rounds per step (mean, max)", "{mean_rounds:.2f}, {max_rounds}"),
    ("the reduce-scatter of the whole batch, MB",
     lambda r: mb(r["reduce_scatter_bytes_per_device"])),
    rows=lambda result: [result["split_exchange"]])


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
                                              "input_pipeline.json"),
          "input_pipeline_decoded_prepare": (input_pipeline_decoded_prepare,
                                             "input_pipeline.json"),
          "input_pipeline_decoded": (input_pipeline_decoded, "input_pipeline.json"),
          "input_pipeline_feeding": (input_pipeline_feeding, "input_pipeline.json"),
          "input_pipeline_split_exchange": (input_pipeline_split_exchange,
                                            "input_pipeline.json")}
