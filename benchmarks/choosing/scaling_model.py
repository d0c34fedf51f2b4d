r"""The time model (analysis/costmodel.py) checked against every time the papers publish, and the
scaling it predicts for data parallelism by all-reduce algorithm.

  python -m benchmarks.choosing.scaling_model [--out=DIR | --publish]

Writes scaling_model.json and scaling_model.png under runs/scaling_model/ (or --out; with --publish
into docs/, where docs/communication.md renders its tables):
  yadan_table1            Yadan et al. 2013, Table 1: five configurations of four TITANs, days for
                          100 epochs at batch 256 (analysis/hardware.py's "yadan2013" machine);
  krizhevsky2014_table1   Krizhevsky 2014, Table 1: owt on 1, 2, 4 and 8 K20s at 128 images per
                          GPU, (conv batch, FC batch) = (K·128, K·128) as scheme (a) and
                          (K·128, 128) as (b) with an FC update per pass ("krizhevsky2014");
  *_order                 whether the model ranks each table's rows as the paper measured them;
  conv_kernels            the papers' codes' convolution rate against a device's batch, with the
                          published timings it is derived from;
  constants               every constant of those machines, with its source; the one
                          calibrated per machine — its efficiency, from its one-GPU time — named;
  speedup_vs_devices      data parallelism at 128 images per device, 1…128 devices, each
                          all-reduce algorithm, on FireCaffe's InfiniBand FDR at the TITAN's rate;
  bbva2017, mxnet_p2, mxnet_kvstore, goyal2017
                          BBVA's post (MXNet on an AWS p2.8xlarge), MXNet's own p2 timings and
                          Goyal et al.'s hour (papers_2017.py), each row with its verdict.
Each row: paper, predicted, ratio (predicted ÷ paper), the step the paper's figure implies and
what of it the model does not explain, and the prediction with each of the machine's inputs added
in turn (`ABLATION`: the links alone; the paper's machine — for Krizhevsky's, its two halves; the
code's convolution rate at each GPU's batch). The model is never tuned on these rows: its
constants come from datasheets, the papers' text and other papers' measurements of the same codes
(docs/communication.md says what each remaining miss lacks).
"""

import dataclasses

from absl import app, flags

import benchmarks
from benchmarks.choosing import papers_2017, tables
from hybrid_parallel import models, partitioning, platforms
from hybrid_parallel.analysis import costmodel, hardware

_OUTPUT = benchmarks.define_output_flags("scaling_model")

IMAGENET_TRAIN = 1_281_167
PAPER = dict(image_size=224, num_classes=1000)  # the papers' ImageNet AlexNet.
# Yadan et al. 2013, Table 1: days for 100 epochs at batch 256.
YADAN_DAYS = {"1 GPU": 10.5, "2 GPUs model": 6.6, "2 GPUs data": 7.0, "4 GPUs data": 7.2,
              "4 GPUs model + data": 4.8}
YADAN_MESHES = {"1 GPU": ("single", 1, 1), "2 GPUs model": ("model", 1, 2),
                "2 GPUs data": ("data", 2, 1), "4 GPUs data": ("data", 4, 1),
                "4 GPUs model + data": ("hybrid", 2, 2)}
YADAN_EPOCHS, YADAN_BATCH = 100, 256
# Krizhevsky 2014, Table 1 (as secondary sources quote it): 8 K20s, 128 images per GPU; one GPU
# took 98.05 h for 90 epochs; speed-ups by (GPUs, conv batch, FC batch).
KRIZHEVSKY_HOURS, KRIZHEVSKY_EPOCHS = 98.05, 90
KRIZHEVSKY_SPEEDUPS = {(2, 256, 256): 1.95, (2, 256, 128): 1.93, (4, 512, 512): 3.74,
                       (4, 512, 128): 3.66, (8, 1024, 1024): 6.25, (8, 1024, 128): 6.16}
DEVICES = (1, 2, 4, 8, 16, 32, 64, 128)
ALGORITHMS = ("parameter_server", "tree", "butterfly", "ring")


# Each of the papers' machines with its inputs added one at a time (the last is the machine as
# analysis/hardware.py describes it): what each input changes in a table's predictions.
ABLATION = {
    "links": lambda m: dataclasses.replace(m, devices_per_socket=None,
                                           cross_socket_staged=False, conv_kernels=None),
    "machine": lambda m: dataclasses.replace(m, conv_kernels=None),
    "machine_and_kernels": lambda m: m,
}


def calibrated(machine: hardware.Machine, arch, *, batch: int, seconds_per_step: float,
               what: str) -> hardware.Machine:
  """`machine` with its efficiency from its one-GPU step (its one calibrated constant)."""
  return papers_2017.calibrated(machine, arch, batch=batch, seconds_per_step=seconds_per_step,
                                sizes=PAPER, what=what)


def ranked_as_paper(papers: list[float], predictions: list[float]) -> bool:
  """Whether every two rows the paper tells apart are predicted in its order (a tie predicted
  where the paper measured a difference is not its order)."""
  pairs = [(i, j) for i in range(len(papers)) for j in range(len(papers))
           if papers[i] < papers[j]]
  return all(predictions[i] < predictions[j] for i, j in pairs)


def yadan_table1() -> tuple[list[dict], hardware.Machine]:
  arch = models.ARCHITECTURES["alexnet"]
  steps = YADAN_EPOCHS * IMAGENET_TRAIN / YADAN_BATCH
  one_step = YADAN_DAYS["1 GPU"] * 86400 / steps
  machines = {name: calibrated(variant(hardware.paper_machines()["yadan2013"]), arch,
                               batch=YADAN_BATCH, seconds_per_step=one_step,
                               what="Yadan et al.'s 1 GPU: 10.5 days for 100 epochs at batch 256")
              for name, variant in ABLATION.items()}
  rows = []
  for name, (scheme, data, model) in YADAN_MESHES.items():
    plan = partitioning.make_plan(scheme, data, model)
    t = {variant: costmodel.step_time(arch, plan, m, global_batch=YADAN_BATCH, **PAPER)
         for variant, m in machines.items()}
    final = t["machine_and_kernels"]
    days = final["step_s"] * steps / 86400
    paper_step = YADAN_DAYS[name] * 86400 / steps
    rows.append({"configuration": name, "mesh": f"{data}×{model}",
                 "images_per_gpu": YADAN_BATCH // plan.batch_divisor,
                 "compute_s": round(final["compute_s"], 3),
                 "communication_s": round(final["communication_s"], 4),
                 "paper": YADAN_DAYS[name], "predicted": round(days, 2),
                 "ratio": round(days / YADAN_DAYS[name], 2),
                 "paper_speedup": round(YADAN_DAYS["1 GPU"] / YADAN_DAYS[name], 2),
                 "predicted_speedup": round(YADAN_DAYS["1 GPU"] / days, 2),
                 "paper_step_s": round(paper_step, 3),
                 "unexplained_s": round(paper_step - final["step_s"], 3) + 0.0,
                 "ablation_days": {variant: round(r["step_s"] * steps / 86400, 2)
                                   for variant, r in t.items()}})
  return rows, machines["machine_and_kernels"]


def krizhevsky2014_table1() -> tuple[list[dict], hardware.Machine]:
  arch = models.ARCHITECTURES["alexnet_owt"]
  one_step = KRIZHEVSKY_HOURS * 3600 / (KRIZHEVSKY_EPOCHS * IMAGENET_TRAIN / 128)
  machines = {name: calibrated(variant(hardware.paper_machines()["krizhevsky2014"]), arch,
                               batch=128, seconds_per_step=one_step,
                               what="Krizhevsky's 1 GPU: 98.05 h for 90 epochs at batch 128")
              for name, variant in ABLATION.items()}
  rows = [{"gpus": 1, "batches (conv, FC)": "(128, 128)", "scheme": "single", "paper": 1.0,
           "predicted": 1.0, "ratio": 1.0, "paper_step_s": round(one_step, 4),
           "unexplained_s": 0.0, "ablation_speedup": {variant: 1.0 for variant in ABLATION}}]
  for (gpus, conv_batch, fc_batch), paper in KRIZHEVSKY_SPEEDUPS.items():
    per_pass = fc_batch < conv_batch
    t = {variant: costmodel.step_time(
             arch, partitioning.make_plan("owt", 1, gpus), m, global_batch=conv_batch, **PAPER,
             owt_variant="b" if per_pass else "a", fc_updates_per_step=gpus if per_pass else 1)
         for variant, m in machines.items()}
    final = t["machine_and_kernels"]
    speedup = gpus * one_step / final["step_s"]
    paper_step = gpus * one_step / paper
    rows.append({"gpus": gpus, "batches (conv, FC)": f"({conv_batch}, {fc_batch})",
                 "scheme": "owt (b), an FC update per pass" if per_pass else "owt (a)",
                 "communication_s": round(final["communication_s"], 4), "paper": paper,
                 "predicted": round(speedup, 2), "ratio": round(speedup / paper, 2),
                 "paper_step_s": round(paper_step, 4),
                 "unexplained_s": round(paper_step - final["step_s"], 4) + 0.0,
                 "ablation_speedup": {variant: round(gpus * one_step / r["step_s"], 2)
                                      for variant, r in t.items()}})
  return rows, machines["machine_and_kernels"]


def conv_kernels() -> list[dict]:
  """The papers' codes' convolution rate by a device's batch, and what it was derived from."""
  return [{"code": k.name,
           "rate_vs_128": {str(b): round(r, 3) for b, r in k.rate_by_batch.items()},
           "measured": {str(b): list(v) if isinstance(v, tuple) else v
                        for b, v in k.measured.items()},
           "source": k.source}
          for k in (hardware.CUDA_CONVNET, hardware.CUDA_CONVNET2)]


def speedup_vs_devices(titan: hardware.Machine) -> dict:
  """Data parallelism at 128 images per device, one device per node on InfiniBand FDR."""
  arch = models.ARCHITECTURES["alexnet"]
  curves = {}
  for algorithm in ALGORITHMS:
    curve = []
    for n in DEVICES:
      if algorithm == "butterfly" and n & (n - 1):
        continue
      machine = dataclasses.replace(titan, devices_per_node=1, nodes=n, network=hardware.FDR,
                                    host_staged=False, sends_parameters=False)
      plan = partitioning.make_plan("data" if n > 1 else "single", n, 1)
      transfers = costmodel.analytic_transfers(arch, plan, global_batch=128 * n, **PAPER,
                                               crossing_axes=("data",))
      t = costmodel.step_time(arch, plan, machine, global_batch=128 * n, **PAPER,
                              transfers=transfers, algorithm=algorithm)
      curve.append({"devices": n, "step_s": round(t["step_s"], 4)})
    base = curve[0]["step_s"]
    for point in curve:
      point["speedup"] = round(point["devices"] * base / point["step_s"], 2)
    curves[algorithm] = curve
  return curves


def constants(*machines: hardware.Machine) -> list[dict]:
  """Every constant of the machines, with its source; a constant two machines share (one
  machine calibrated twice) once."""
  rows = []
  for m in machines:
    rows += [row for row in machine_constants(m) if row not in rows]
  return rows


def machine_constants(m: hardware.Machine) -> list[dict]:
  """One machine's constants, each with its source."""
  rows = []
  rows.append({"machine": m.name, "constant": f"{m.device.name} peak (float32)",
               "value": m.device.peak_flops["float32"], "source": m.device.source})
  for link in (m.node_link, m.network, m.host_memory):
    if link:
      rows.append({"machine": m.name, "constant": link.name,
                   "value": {"alpha_s": link.alpha, "beta_s_per_byte": link.beta,
                             "gamma_s_per_byte": link.gamma}, "source": link.source})
  layout = {"host_staged": m.host_staged, "sends_parameters": m.sends_parameters,
            "devices_per_uplink": m.devices_per_uplink,
            "devices_per_socket": m.devices_per_socket,
            "cross_socket_staged": m.cross_socket_staged}
  if m.switch_groups or m.network_per_node:
    layout.update(switch_groups=list(m.switch_groups), network_per_node=m.network_per_node)
  rows.append({"machine": m.name, "constant": "how the implementation moved data",
               "value": layout,
               "source": m.layout_source or "analysis/hardware.py: the paper's text and its "
                                              "machine"})
  if m.conv_kernels:
    rows.append({"machine": m.name, "constant": f"{m.conv_kernels.name} rate vs 128 images",
                 "value": {f"at {b}": round(r, 3)
                           for b, r in m.conv_kernels.rate_by_batch.items()},
                 "source": m.conv_kernels.source})
  rows.append({"machine": m.name, "constant": "efficiency (CALIBRATED)",
               "value": round(m.efficiency, 4), "source": m.calibrated_from})
  if m.step_overhead_s:
    rows.append({"machine": m.name, "constant": "seconds per step beyond the model (CALIBRATED)",
                 "value": round(m.step_overhead_s, 4), "source": m.calibrated_from})
  return rows


def main(argv):
  del argv
  platforms.start()  # before anything queries the devices.
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  yadan, titans = yadan_table1()
  krizhevsky, k20s = krizhevsky2014_table1()
  rows_2017, machines_2017 = papers_2017.paper_rows()
  result = {"yadan_table1": yadan, "krizhevsky2014_table1": krizhevsky,
            "yadan_order": {variant: ranked_as_paper(
                [r["paper"] for r in yadan], [r["ablation_days"][variant] for r in yadan])
                for variant in ABLATION},
            "krizhevsky2014_order": {variant: ranked_as_paper(
                [r["paper"] for r in krizhevsky],
                [r["ablation_speedup"][variant] for r in krizhevsky]) for variant in ABLATION},
            "conv_kernels": conv_kernels(),
            "constants": constants(titans, k20s, *machines_2017),
            "speedup_vs_devices": speedup_vs_devices(titans), **rows_2017}
  print("\n\n".join(table(result) for table in (
      tables.scaling_model_yadan, tables.scaling_model_krizhevsky, tables.scaling_model_bbva,
      tables.scaling_model_mxnet_p2, tables.scaling_model_goyal)))
  benchmarks.publish(result, _OUTPUT.path("scaling_model.json"))

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
  ax.set_title("AlexNet data parallel, time model, InfiniBand FDR")
  ax.legend()
  ax.grid(True, which="both", alpha=0.3)
  fig.tight_layout()
  fig.savefig(_OUTPUT.path("scaling_model.png"), dpi=110)


if __name__ == "__main__":
  app.run(main)
