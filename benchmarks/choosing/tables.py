"""The tables of the time model against the papers (docs/communication.md), from
scaling_model.json (benchmarks/choosing/scaling_model.py)."""

from benchmarks import per_row, table


def scaling_model(result) -> str:
  """Predicted speed-up vs devices, by all-reduce algorithm."""
  points = result["speedup_vs_devices"]
  speedup = {(a, p["devices"]): p["speedup"] for a, ps in points.items() for p in ps}
  devices = sorted({n for _, n in speedup})
  return table(["devices", *(a.replace("_", " ") for a in points)],
                ([n, *(f"{speedup[a, n]:.1f}" if (a, n) in speedup else "—" for a in points)]
                 for n in devices))


def _ablation(key: str, variant: str):
  """A cell: the row's prediction with the machine's inputs up to `variant` (ABLATION)."""
  return lambda r: "—" if key not in r else f"{r[key][variant]}"


# Where a paper gives its step time: that time, and what the model leaves of it unexplained.
_UNEXPLAINED = ("paper's s per step, of it unexplained",
                lambda r: f"{r['paper_step_s']}, {r['unexplained_s']}" if "unexplained_s" in r
                else "—")


# Yadan et al.'s Table 1 through the time model.
scaling_model_yadan = per_row(
    ("configuration", "{configuration}"), ("mesh", "{mesh}"),
    ("images per GPU (convs)", lambda r: str(r.get("images_per_gpu", "—"))),
    ("paper days", "{paper}"),
    ("predicted days, kernels' rate independent of the batch",
     _ablation("ablation_days", "machine")),
    ("predicted days (with cuda-convnet's rate at the GPU's batch)", "{predicted}"),
    ("predicted ÷ paper", "{ratio}"), ("paper speed-up", "{paper_speedup}"),
    ("predicted speed-up", "{predicted_speedup}"),
    ("predicted compute / communication s per step", "{compute_s} / {communication_s}"),
    _UNEXPLAINED,
    rows=lambda result: result["yadan_table1"],
    optional=("images per GPU (convs)",
              "predicted days, kernels' rate independent of the batch",
              _UNEXPLAINED[0]))

# Krizhevsky 2014's Table 1 through the time model.
scaling_model_krizhevsky = per_row(
    ("GPUs", "{gpus}"), ("batches (conv, FC)", lambda r: r["batches (conv, FC)"]),
    ("as", "{scheme}"), ("paper speed-up", "{paper}"),
    ("predicted, PCIe 2.0 peer to peer among all eight", _ablation("ablation_speedup", "links")),
    ("predicted, two halves joined through host memory",
     _ablation("ablation_speedup", "machine")),
    ("predicted (and cuda-convnet2's rate at the GPU's batch)", "{predicted}"),
    ("predicted ÷ paper", "{ratio}"),
    _UNEXPLAINED,
    rows=lambda result: result["krizhevsky2014_table1"],
    optional=("predicted, PCIe 2.0 peer to peer among all eight",
              "predicted, two halves joined through host memory",
              _UNEXPLAINED[0]))

# The papers' codes' convolution rate against a device's batch.
scaling_model_kernels = per_row(
    ("code", "{code}"),
    *((f"rate at {b} images (÷ rate at 128)", lambda r, b=b: f"{r['rate_vs_128'][str(b)]:.3f}")
      for b in (32, 64)),
    ("as published, batch 32 / 64 / 128",
     lambda r: " / ".join(_published(r["measured"][str(b)]) for b in (32, 64, 128))),
    ("source", "{source}"), rows=lambda result: result.get("conv_kernels", []))


def _published(value) -> str:
  """Mathieu et al.'s three passes in seconds, or Chetlur et al.'s TFLOP/s."""
  if isinstance(value, list):
    return "(" + ", ".join(f"{v:.4f}" for v in value) + ") s"
  return f"{value} TFLOP/s"


def _value(value) -> str:
  if isinstance(value, dict):
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in value.items())
  return f"{value:.4g}" if isinstance(value, float) else str(value)


# The constants of the papers' machines, each with its source.
scaling_model_constants = per_row(
    ("machine", "{machine}"), ("constant", "{constant}"), ("value", lambda r: _value(r["value"])),
    ("source", "{source}"), rows=lambda result: result["constants"])

def _efficiency(value) -> str:
  return "—" if value is None else f"{value:.1%}"


def _share(seconds_key: str, share_key: str):
  return lambda r: f"{1e3 * r[seconds_key]:.1f} ms ({r[share_key]:.1%})"


# BBVA's post: its network and AlexNet on an AWS p2.8xlarge, 1 → 8 GPUs (papers_2017.py).
scaling_model_bbva = per_row(
    ("network", "{network}: {as}"), ("GPUs × images per GPU", "{gpus} × {images_per_gpu}"),
    ("parameters", lambda r: f"{r['parameters']:,}"),
    ("training GFLOP per image", "{gflop_per_image}"),
    ("MB each GPU sends per step", "{mb_sent_per_gpu}"),
    ("its exchange made after backprop (share of the step)",
     _share("exchange_s", "exchange_share")),
    ("paper", lambda r: _efficiency(r["paper"]) if r["paper"] else "— (no figure)"),
    ("predicted, each GPU on its own x16 link, exchanged after backprop",
     lambda r: _efficiency(r["ablation_efficiency"]["links"])),
    ("predicted, two boards behind each x16 link, exchanged after backprop",
     lambda r: _efficiency(r["ablation_efficiency"]["machine"])),
    ("predicted, exchanged in backprop order (MXNet's engine)",
     lambda r: _efficiency(r["predicted"])),
    ("predicted ÷ paper", lambda r: "—" if r["ratio"] is None else f"{r['ratio']}"),
    ("verdict", "{verdict}"), rows=lambda result: result["bbva2017"])

# MXNet's own published scaling on a p2.16xlarge's GPUs 0–7, and its kvstore bandwidth.
scaling_model_mxnet_p2 = per_row(
    ("network", "{network}"), ("GPUs × images per GPU", "{gpus} × {images_per_gpu}"),
    ("measured (MXNet's README)", lambda r: _efficiency(r["paper"])),
    ("predicted, own links, after backprop",
     lambda r: _efficiency(r["ablation_efficiency"]["links"])),
    ("predicted, shared links, after backprop",
     lambda r: _efficiency(r["ablation_efficiency"]["machine"])),
    ("predicted, in backprop order", lambda r: _efficiency(r["predicted"])),
    ("predicted ÷ measured", "{ratio}"), ("verdict", "{verdict}"),
    rows=lambda result: result["mxnet_p2"])

scaling_model_kvstore = per_row(
    ("GPUs", "{gpus}"), ("keys, MB", "{keys}, {mb}"),
    ("measured GB/s per GPU (MXNet's tools/bandwidth)", "{paper}"),
    ("predicted", "{predicted}"), ("predicted ÷ measured", "{ratio}"), ("verdict", "{verdict}"),
    rows=lambda result: [result["mxnet_kvstore"]])

# Goyal et al.'s hour: ResNet-50 at 32 images a P100, against the 8-GPU baseline.
scaling_model_goyal = per_row(
    ("GPUs (servers)", "{gpus} ({servers})"), ("minibatch", "{minibatch}"),
    ("figure", "{figure}"), ("paper", "{paper}"),
    ("predicted, summed after backprop, no latency", lambda r: f"{r['ablation']['links']}"),
    ("predicted, summed after backprop", lambda r: f"{r['ablation']['latency']}"),
    ("predicted, summed in backprop order (Caffe2 + Gloo)", "{predicted}"),
    ("predicted ÷ paper", "{ratio}"),
    ("s per iteration: baseline, paper, predicted",
     "{baseline_step_s}, {paper_step_s}, {predicted_step_s}"),
    ("verdict", "{verdict}"), rows=lambda result: result["goyal2017"])

TABLES = {"scaling_model": (scaling_model, "scaling_model.json"),
          "scaling_model_yadan": (scaling_model_yadan, "scaling_model.json"),
          "scaling_model_krizhevsky": (scaling_model_krizhevsky, "scaling_model.json"),
          "scaling_model_constants": (scaling_model_constants, "scaling_model.json"),
          "scaling_model_kernels": (scaling_model_kernels, "scaling_model.json"),
          "scaling_model_bbva": (scaling_model_bbva, "scaling_model.json"),
          "scaling_model_mxnet_p2": (scaling_model_mxnet_p2, "scaling_model.json"),
          "scaling_model_kvstore": (scaling_model_kvstore, "scaling_model.json"),
          "scaling_model_goyal": (scaling_model_goyal, "scaling_model.json")}
