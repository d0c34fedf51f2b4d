r"""Predicted scaling of AlexNet training from the α-β cost model (analysis/costmodel.py).

  python -m benchmarks.choosing.scaling_model [--out=docs]

Writes to --out (and refreshes the tables of docs/communication.md):
  scaling_model.json         speedup vs N = 1…128 for the gradient all-reduce by parameter server,
                             binomial tree, ring and butterfly (data parallel, 128 images per
                             device, weak scaling), Yadan et al.'s Table 1 on four GPUs of 2013
                             beside the paper's days, and Krizhevsky 2014's owt schemes (a), (b),
                             (c) on 8 K20s (costmodel.owt_step_time) beside his speed-ups;
  scaling_model.png          the speedup curves.

Assumptions (stated, not measured; change them with the flags):
  * compute: the effective rate Yadan et al.'s own 1-GPU run implies — 100 epochs of ImageNet
    (1,281,167 images) × 4.35 GFLOP per image (two-column AlexNet, training = 3 × forward) in
    10.5 days ≈ 0.61 TFLOP/s on a TITAN (13% of its 4.5 TFLOP/s peak). The same rate for every
    device and every per-device batch (no small-batch inefficiency), no compute/communication
    overlap.
  * the scaling curves: InfiniBand FDR as in FireCaffe, α = 5 µs, 6 GB/s (β = 1/6e9 s/B);
  * Table 1: one PCIe 3.0 host, α = 10 µs, 12 GB/s per direction (β = 1/12e9 s/B); the same
    link for the 8 K20s of Krizhevsky 2014, whose compute rate his 1-GPU time implies (98.05 h
    for 90 epochs of batch 128, one-column AlexNet: ≈ 1.4 TFLOP/s).
  γ (reduction arithmetic) = 1/100e9 s/B in both.
"""

import os

from absl import app, flags

import benchmarks
from benchmarks.choosing import tables
from hybrid_parallel import models, partitioning, platforms
from hybrid_parallel.analysis import costmodel

_OUT = flags.DEFINE_string("out", benchmarks.DOCS, "Output directory.")
_GBPS_CLUSTER = flags.DEFINE_float("cluster_gb_per_s", 6.0, "Cluster link bandwidth, GB/s.")
_GBPS_PCIE = flags.DEFINE_float("pcie_gb_per_s", 12.0, "PCIe bandwidth, GB/s.")

IMAGENET_TRAIN = 1_281_167
EPOCHS = 100
PAPER_DAYS = {"1 GPU": 10.5, "2 GPUs model": 6.6, "2 GPUs data": 7.0, "4 GPUs data": 7.2,
              "4 GPUs model + data": 4.8}
TABLE1 = {"1 GPU": ("single", 1, 1), "2 GPUs model": ("model", 1, 2),
          "2 GPUs data": ("data", 2, 1), "4 GPUs data": ("data", 4, 1),
          "4 GPUs model + data": ("hybrid", 2, 2)}
PAPER = dict(image_size=224, num_classes=1000)  # the papers' ImageNet AlexNet.
DEVICES = (1, 2, 4, 8, 16, 32, 64, 128)
ALGORITHMS = ("parameter_server", "tree", "butterfly", "ring")


def calibrated_rate(arch) -> float:
  """FLOP/s that makes one device take the paper's 10.5 days for 100 epochs."""
  flops = costmodel.training_flops_per_image(arch, 224, 1000) * IMAGENET_TRAIN * EPOCHS
  return flops / (PAPER_DAYS["1 GPU"] * 86400)


def scaling_curves(arch, rate, link) -> dict:
  per_device = 128
  curves = {}
  for algorithm in ALGORITHMS:
    base = costmodel.step_time(arch, partitioning.make_plan("single", 1, 1),
                               global_batch=per_device, **PAPER, flops_per_second=rate,
                               link=link, algorithm=algorithm)["step_s"]
    curve = []
    for n in DEVICES:
      if algorithm == "butterfly" and n & (n - 1):
        continue
      plan = partitioning.make_plan("data" if n > 1 else "single", n, 1)
      t = costmodel.step_time(arch, plan, global_batch=per_device * n, **PAPER,
                              flops_per_second=rate, link=link, algorithm=algorithm)["step_s"]
      curve.append({"devices": n, "speedup": round(n * base / t, 2), "step_s": round(t, 4)})
    curves[algorithm] = curve
  return curves


def table1(arch, rate, link) -> list[dict]:
  """Predicted days per configuration, and the bandwidth the paper's days imply.

  `implied_gb_per_s`: if compute scaled perfectly, the rest of the paper's step time would be
  communication; this is the bandwidth at which the config's bytes per device take that long.
  """
  steps = EPOCHS * IMAGENET_TRAIN / 256
  rows = []
  for name, (scheme, data, model) in TABLE1.items():
    plan = partitioning.make_plan(scheme, data, model)
    t = costmodel.step_time(arch, plan, global_batch=256, **PAPER, flops_per_second=rate,
                            link=link, algorithm="ring")
    days = t["step_s"] * steps / 86400
    sent = costmodel.traffic(arch, plan, global_batch=256, **PAPER).total
    left = PAPER_DAYS[name] * 86400 / steps - t["compute_s"]
    rows.append({"configuration": name, "mesh": f"{data}×{model}",
                 "compute_s": round(t["compute_s"], 3),
                 "communication_s": round(t["communication_s"], 4),
                 "mb_per_device": round(sent / 1e6, 1),
                 "predicted_days": round(days, 2), "paper_days": PAPER_DAYS[name],
                 "predicted_speedup": None, "paper_speedup": round(10.5 / PAPER_DAYS[name], 2),
                 "implied_gb_per_s": round(sent / left / 1e9, 2) if sent else None})
  for row in rows:
    row["predicted_speedup"] = round(rows[0]["predicted_days"] / row["predicted_days"], 2)
  return rows


# Krizhevsky 2014 (arXiv:1404.5997), Table 1, as secondary sources quote it: 8 K20 GPUs, batch
# 128 per worker; one GPU took 98.05 h for 90 epochs; (conv batch, FC batch) speed-ups.
K20_ONE_GPU_HOURS = 98.05
K20_EPOCHS = 90
KRIZHEVSKY_SPEEDUPS = {"(1024, 1024)": 6.25, "(1024, 128)": 6.16}


def owt_variants(arch, link) -> dict:
  """Predicted speed-ups of owt on 8 GPUs of 2014 (K20, one PCIe host) for schemes (a), (b) and
  (c), beside Krizhevsky's: the compute rate is the one his 1-GPU time implies."""
  rate = (costmodel.training_flops_per_image(arch, 224, 1000) * IMAGENET_TRAIN * K20_EPOCHS /
          (K20_ONE_GPU_HOURS * 3600))
  one = costmodel.step_time(arch, partitioning.make_plan("single", 1, 1), global_batch=128,
                            **PAPER, flops_per_second=rate, link=link)["step_s"]
  plan = partitioning.make_plan("owt", 1, 8)
  rows = []
  for variant, updates, batches in (("a", 1, "(1024, 1024)"), ("b", 1, "(1024, 1024)"),
                                    ("c", 1, "(1024, 1024)"), ("b", 8, "(1024, 128)"),
                                    ("c", 8, "(1024, 128)")):
    t = costmodel.owt_step_time(arch, plan, global_batch=1024, **PAPER, flops_per_second=rate,
                                link=link, variant=variant, fc_updates_per_step=updates)
    rows.append({"variant": variant, "fc_updates_per_step": updates,
                 "batches (conv, FC)": batches, "step_s": round(t["step_s"], 4),
                 "exposed_communication_s": round(t["communication_s"], 4),
                 "predicted_speedup": round(8 * one / t["step_s"], 2),
                 "krizhevsky_speedup": KRIZHEVSKY_SPEEDUPS[batches]})
  return {"flops_per_second": rate, "link": vars(link), "one_gpu_step_s": round(one, 4),
          "rows": rows}


def main(argv):
  del argv
  platforms.start()  # before anything queries the devices.
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  arch = models.ARCHITECTURES["alexnet"]
  rate = calibrated_rate(arch)
  cluster = costmodel.Link("InfiniBand FDR", 5e-6, 1 / (_GBPS_CLUSTER.value * 1e9), 1e-11)
  pcie = costmodel.Link("PCIe 3.0", 1e-5, 1 / (_GBPS_PCIE.value * 1e9), 1e-11)
  result = {"flops_per_second": rate, "cluster_link": vars(cluster), "pcie_link": vars(pcie),
            "speedup_vs_devices": scaling_curves(arch, rate, cluster),
            "yadan_table1": table1(arch, rate, pcie),
            "owt_variants_k20": owt_variants(models.ARCHITECTURES["alexnet_owt"], pcie)}
  print(tables.scaling_model(result) + "\n\n" + tables.scaling_model_yadan(result) + "\n\n" +
        tables.scaling_model_owt(result))
  benchmarks.publish(result, os.path.join(_OUT.value, "scaling_model.json"))

  fig, ax = plt.subplots(figsize=(6, 4.2))
  ax.plot(DEVICES, DEVICES, color="0.7", linestyle=":", label="linear")
  for algorithm in ALGORITHMS:
    points = result["speedup_vs_devices"][algorithm]
    ax.plot([p["devices"] for p in points], [p["speedup"] for p in points], marker="o",
            label=algorithm.replace("_", " "))
  ax.set_xscale("log", base=2)
  ax.set_yscale("log", base=2)
  ax.set_xlabel("devices (128 images each)")
  ax.set_ylabel("predicted speed-up (images/s vs 1 device)")
  ax.set_title("AlexNet data parallel, α-β model, InfiniBand FDR")
  ax.legend()
  ax.grid(True, which="both", alpha=0.3)
  fig.tight_layout()
  fig.savefig(os.path.join(_OUT.value, "scaling_model.png"), dpi=110)


if __name__ == "__main__":
  app.run(main)
