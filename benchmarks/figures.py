"""The figures the README and the guides quote inline, each read from a study's JSON in docs/.

A page quotes a figure as

  ... takes <!-- figure: table1.hybrid4.wall_clock -->129.8 s<!-- end --> on ...

and `python -m benchmarks.docs` rewrites the text between the markers from the JSON, as it does the
tables; tests/docs_test.py fails when a figure differs from its JSON, and when README.md or a guide
holds a measured figure (a number with a unit of time, rate, percent or ratio) outside a table or
figure block. `FIGURES` maps each name to (function, the JSON file in docs/ it reads), the
function taking the file's results and returning the text — or, for a function made by
`_of_record`, the file's record (where and when the figures beside it were measured).
"""

from benchmarks import machine_in_words, percent


def _find(rows, **fields):
  """The one item of `rows` whose fields equal `fields`."""
  found = [r for r in rows if all(r.get(k) == v for k, v in fields.items())]
  if len(found) != 1:
    raise KeyError(f"{len(found)} rows match {fields}")
  return found[0]


def _result(report, section):
  """A section's result in benchmarks/speed/accelerator.py's report."""
  return report["sections"][section]["result"]


def _of_record(field: str):
  """A field of the results file's record ("date", "machine")."""
  def figure(record):
    return record[field]
  figure.of_record = True
  return figure


def _machine_in_a_sentence(record) -> str:
  """The record's machine as a sentence names it (benchmarks.machine_in_words)."""
  return machine_in_words(record["machine"])


_machine_in_a_sentence.of_record = True


def _count(x: float) -> str:
  return f"{x:,.0f}"


def _seconds(x: float) -> str:
  return f"{x:.0f} s"


def _table1(config: str, key: str):
  """A field of one config's end-to-end run (benchmarks/papers/table1.py)."""
  formats = {"wall_clock_s": _seconds, "eval_top1": percent}
  return lambda rows: formats[key](_find(rows, config=config)[key])


def _gpu_step(model, dtype, batch, key):
  """A bare step of benchmarks/speed/accelerator.py's single_device section (one H200)."""
  def figure(report):
    r = _find(_result(report, "single_device"), model=model, dtype=dtype, batch=batch)
    return _count(r[key]) if key == "images_per_sec" else percent(r[key])
  return figure


def _best_pytorch_ratio(report) -> str:
  """Ours ÷ the best PyTorch variant, bfloat16 alexnet_owt at batch 512 (one H200)."""
  r = _find(_result(report, "pytorch")["comparison"], batch=512, dtype="bfloat16")
  return f"{r['ratio']:.2f}×"


def _trainer(batch, key):
  """main.py against the bare step (one H100), at `batch`."""
  def figure(report):
    r = _find(_result(report, "trainer"), batch=batch)
    return _count(r[key]) if key.endswith("images_per_sec") else f"{r[key]:.3g}×"
  return figure


def _notebook(key):
  """notebooks/colab.ipynb executed on the GPU (train_cell_s, eval_top1)."""
  def figure(report):
    r = _result(report, "notebook")
    return _seconds(r[key]) if key == "train_cell_s" else percent(r["final"][key])
  return figure


def _ranking(gpu, config, key):
  """The 8-GPU prediction of benchmarks/speed/gpu_compile.py's ranking."""
  def figure(data):
    r = _find(data["ranking"], gpu=gpu, config=config)
    return _count(r[key]) if key.endswith("images_per_sec") else f"{r[key]:.2f}×"
  return figure


def _tpu(topology, config, key):
  """A compile-only TPU estimate (benchmarks/speed/tpu_compile.py), bfloat16."""
  def figure(rows):
    r = _find(rows, topology=topology, config=config, dtype="bfloat16")
    return f"{r[key]:.0f} ms" if key == "estimated_step_ms" else f"{r[key]:.1f} GiB"
  return figure


def _mean_sd(values) -> str:
  """Top-1 over seeds as "mean ± sd%"."""
  import statistics
  return f"{100 * statistics.mean(values):.1f} ± {100 * statistics.stdev(values):.1f}%"


def _asgd8(key: str):
  """configs/asgd8.py against synchronous data parallelism on the seeds that did not choose it
  (benchmarks/papers/asynchronous_findings.preset_validation)."""
  def figure(results):
    v = results["preset_validation"]
    if key == "seeds":
      return f"{min(v['seeds'])}–{max(v['seeds'])}"
    if key == "target":
      return f"{100 * results['chosen']['target_top1']:.1f}%"
    if key in ("top1", "synchronous_top1"):
      return _mean_sd(v[key])
    # Time to the target as a multiple of synchronous training's: the inverse of the speed-up.
    from benchmarks.papers import asynchronous_claims
    return asynchronous_claims.times_of(v["speedup_over_synchronous"])
  return figure


def _yuv420_vs_jpeg_path(key: str):
  """How far a YUV 4:2:0 set lies from the JPEG path's pixels, in levels (input_pipeline.json's
  decoded preparation rows)."""
  def figure(results):
    row = _find(results["decoded"]["decoded_prepare"], colour="yuv420")
    return f"{row['levels_vs_jpeg_path'][key]:g}"
  return figure


def _claim(claim_id: str, part: str):
  """A line of docs/asynchronous.md's verdict table (asynchronous_claims.verdicts): its `part`-th
  key number, or ("verdict") its verdict with Holm's adjusted p."""
  def figure(results):
    from benchmarks.papers import asynchronous_claims
    line = _find(results["verdicts"], id=claim_id)
    if part == "verdict":
      return asynchronous_claims.verdict_text(line)
    return asynchronous_claims.key_value(line["key"][int(part)][1])
  return figure


# The asynchronous study's findings as its page quotes them: (claim, part) of its verdict table.
ASYNCHRONOUS_CLAIMS = (
    ("asgd8_less_accurate", "0"), ("asgd8_less_accurate", "verdict"),
    ("asgd8_slower_everywhere", "0"), ("summing_no_rate", "0"), ("summing_no_rate", "verdict"),
    ("staleness_accuracy", "0"), ("staleness_step", "0"), ("momentum_not_cause", "0"),
    ("speeds_heavy_tailed", "0"), ("speeds_heavy_tailed", "1"), ("speeds_heavy_tailed", "2"),
    ("control_data_order", "verdict"), ("control_phases", "verdict"), ("su_faster", "0"),
    ("su_less_often", "0"))


FIGURES = {
    # The quick start: `python main.py --config=configs/hybrid4.py` from scratch.
    "table1.hybrid4.wall_clock": (_table1("hybrid4", "wall_clock_s"), "table1.json"),
    "table1.hybrid4.top1": (_table1("hybrid4", "eval_top1"), "table1.json"),
    "table1.cpu": (_machine_in_a_sentence, "table1.json"),
    "table1.date": (_of_record("date"), "table1.json"),
    # The decoded set's YUV 4:2:0 layout against the JPEG path's pixels.
    **{f"input_pipeline.yuv420_vs_jpeg_path.{key}": (_yuv420_vs_jpeg_path(key),
                                                      "input_pipeline.json")
       for key in ("mean", "p99", "max")},
    # One GPU.
    "gpu.owt_bf16_512.images_per_sec": (
        _gpu_step("alexnet_owt", "bfloat16", 512, "images_per_sec"), "gpu.json"),
    "gpu.owt_bf16_512.mfu": (_gpu_step("alexnet_owt", "bfloat16", 512, "mfu"), "gpu.json"),
    "gpu.owt_bf16_512.over_pytorch": (_best_pytorch_ratio, "gpu.json"),
    "gpu_h100.trainer_512.images_per_sec": (_trainer(512, "trainer_images_per_sec"),
                                            "gpu_h100.json"),
    "gpu_h100.trainer_512.over_step": (_trainer(512, "trainer_vs_step"), "gpu_h100.json"),
    "gpu_h100.notebook.seconds": (_notebook("train_cell_s"), "gpu_h100.json"),
    "gpu_h100.notebook.top1": (_notebook("eval_top1"), "gpu_h100.json"),
    # Eight GPUs, compiled and predicted.
    "gpu_compile.h100.owt8.images_per_sec": (
        _ranking("h100", "owt8", "predicted_images_per_sec"), "gpu_compile.json"),
    "gpu_compile.h100.owt8.speedup": (_ranking("h100", "owt8", "predicted_speedup"),
                                      "gpu_compile.json"),
    "gpu_compile.h100.data8.speedup": (_ranking("h100", "data8", "predicted_speedup"),
                                       "gpu_compile.json"),
    # configs/asgd8.py against synchronous training, seeds that did not choose it.
    "asynchronous.asgd8.top1": (_asgd8("top1"), "asynchronous.json"),
    "asynchronous.asgd8.synchronous_top1": (_asgd8("synchronous_top1"), "asynchronous.json"),
    "asynchronous.asgd8.seeds": (_asgd8("seeds"), "asynchronous.json"),
    "asynchronous.asgd8.target": (_asgd8("target"), "asynchronous.json"),
    "asynchronous.asgd8.time_vs_synchronous": (_asgd8("time_vs_synchronous"), "asynchronous.json"),
    **{f"asynchronous.{claim_id}.{part}": (_claim(claim_id, part), "asynchronous.json")
       for claim_id, part in ASYNCHRONOUS_CLAIMS},
    # One TPU chip, estimated from the compiled program.
    "tpu.v5e_1x1.single.step": (_tpu("v5e:1x1", "single", "estimated_step_ms"), "tpu.json"),
    "tpu.v5e_1x1.single.hbm": (_tpu("v5e:1x1", "single", "hbm_gib"), "tpu.json"),
}
