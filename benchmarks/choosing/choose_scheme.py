r"""Which scheme trains fastest on a described machine: every scheme that fits it, ranked by the
time model (analysis/costmodel.py), best first.

  python -m benchmarks.choosing.choose_scheme --gpu=h100 --gpus_per_node=8 --nodes=2 \
      --inter_node_gb_per_s=50 --model=alexnet_owt --global_batch=1024 [--dtype=bfloat16]

The machine: nodes of --gpus_per_node GPUs — H100, H200, A100 (80 or 40 GB), L4 or V100, each on
its node's link (NVLink; PCIe for the L4) — joined by --inter_node_gb_per_s per GPU
(analysis/hardware.py, every constant with its source). The candidates on its N GPUs: data N×1,
model 1×M, hybrid and owt (a), (b), (c) on D×M for each power of two M ≤ --gpus_per_node (the
model axis within a node). Each is compiled for the machine's compile-only GPUs where JAX's CUDA
plugin is installed (requirements-test.txt; the V100 needs the CUDA 12 plugin's), its collectives
and HBM read from the program; elsewhere, or with --analytic, its bytes are the analytic minimum
(which the compiled programs were shown to send) and its HBM is not known. Compute: the one-GPU
curve measured on an H200 (docs/gpu.json), on another GPU at the same share of that GPU's peak,
an assumption: the ranking is what to read there, not the times (gpu_topologies.calibrated_node).
Prints the table — scheme, mesh, predicted step, images/s, HBM per GPU and whether it fits, MB
each GPU sends, MB crossing the nodes — and one sentence on why the best wins; `--json` prints the
rows as JSON instead. A bad machine description is one sentence and exit 1.
"""

import dataclasses
import json
import sys

from absl import app, flags

import experiment
from benchmarks import per_row
from benchmarks.speed import gpu_topologies
from configs import default
from hybrid_parallel import models, platforms
from hybrid_parallel.analysis import costmodel, hardware
from hybrid_parallel.errors import UserError

_GPU = flags.DEFINE_string("gpu", "h100", "The GPU: h100, h200, a100 (80 GB), a100_40gb, l4 or "
                          "v100.")
_PER_NODE = flags.DEFINE_integer("gpus_per_node", 8, "GPUs per node (NVLink within a node).")
_NODES = flags.DEFINE_integer("nodes", 1, "Nodes.")
_NETWORK = flags.DEFINE_float("inter_node_gb_per_s", 50.0, "Network bandwidth per GPU between "
                              "nodes, GB/s (one 400 Gb/s NIC per GPU: 50).")
_MODEL = flags.DEFINE_string("model", "alexnet_owt", "The network (models.ARCHITECTURES).")
_BATCH = flags.DEFINE_integer("global_batch", 1024, "Images per step over all GPUs.")
_DTYPE = flags.DEFINE_string("dtype", "bfloat16", "bfloat16 or float32.")
_IMAGE_SIZE = flags.DEFINE_integer("image_size", 224, "Input side.")
_ANALYTIC = flags.DEFINE_bool("analytic", False, "The analytic bytes, not compiled programs.")
_JSON = flags.DEFINE_bool("json", False, "Print the rows as JSON.")
NUM_CLASSES = 1000
# Schemes whose predicted rates differ by less than this are called a tie: the model's rows for
# Krizhevsky's 2 and 4 GPUs are within 7% of his times (docs/communication.md), so a few percent
# is below what it can tell apart.
TIE = 0.05


@dataclasses.dataclass(frozen=True)
class Described:
  """The machine as the flags describe it."""
  gpu: str
  gpus_per_node: int
  nodes: int
  network_bytes_per_s: float
  model: str
  global_batch: int
  dtype: str
  image_size: int


def check(machine: Described) -> None:
  """One sentence (a SystemExit's) for a description that cannot work."""
  problems = [
      (machine.gpu not in gpu_topologies.GPUS,
       f"--gpu {machine.gpu!r} is not described; choose one of "
       f"{', '.join(f'{key} ({hardware.DEVICES[key].name})' for key in gpu_topologies.GPUS)}"),
      (machine.gpus_per_node < 1, f"--gpus_per_node must be at least 1, got "
                                  f"{machine.gpus_per_node}"),
      (machine.nodes < 1, f"--nodes must be at least 1, got {machine.nodes}"),
      (not machine.network_bytes_per_s > 0, f"--inter_node_gb_per_s must be more than 0, got "
                                            f"{machine.network_bytes_per_s / 1e9:g}"),
      (machine.model not in models.ARCHITECTURES,
       f"--model {machine.model!r} is not a network; choose one of "
       f"{', '.join(models.ARCHITECTURES)}"),
      (machine.dtype not in ("bfloat16", "float32"),
       f"--dtype must be bfloat16 or float32, got {machine.dtype!r}"),
      (machine.global_batch < 1, f"--global_batch must be at least 1, got "
                                 f"{machine.global_batch}"),
  ]
  for failed, sentence in problems:
    if failed:
      raise SystemExit(f"error: {sentence}.")


def candidates(gpus: int, gpus_per_node: int):
  """(name, scheme, data, model ways, owt variant) of every scheme tried on `gpus` GPUs."""
  yield f"data {gpus}×1", "data", gpus, 1, "a"
  ways = [2 ** k for k in range(1, gpus.bit_length()) if 2 ** k <= gpus_per_node
          and gpus % 2 ** k == 0]
  for m in ways:
    if m == gpus:  # hybrid with one data row is the model scheme.
      yield f"model 1×{m}", "model", 1, m, "a"
    else:
      yield f"hybrid {gpus // m}×{m}", "hybrid", gpus // m, m, "a"
    for variant in "abc":
      yield f"owt {gpus // m}×{m} ({variant})", "owt", gpus // m, m, variant


def rank(machine: Described, *, compiled: bool) -> tuple[list[dict], list[dict]]:
  """Every candidate's row, best first, and the candidates refused (with their reason)."""
  gpus = machine.gpus_per_node * machine.nodes
  arch = models.ARCHITECTURES[machine.model]
  devices = (gpu_topologies.topology_devices(
      machine.gpu, f"1x{machine.nodes}x{machine.gpus_per_node}") if compiled else None)
  rows, refused = [], []
  for name, scheme, data, model, variant in candidates(gpus, machine.gpus_per_node):
    config = default.for_scheme(scheme, data, model, global_batch_size=machine.global_batch)
    config.update(model=machine.model, dtype=machine.dtype, image_size=machine.image_size,
                  owt_variant=variant, eval_batch_size=machine.global_batch)
    try:
      spec = experiment.resolve(config)
    except UserError as e:
      refused.append({"scheme": name, "reason": str(e)})
      continue
    plan = spec.plan
    node = gpu_topologies.calibrated_node(
        machine.gpu, f"1x{machine.nodes}x{machine.gpus_per_node}",
        model=measured_model(machine.model), dtype=machine.dtype,
        measured=gpu_topologies.one_gpu_rows())
    node = dataclasses.replace(node, network=dataclasses.replace(
        node.network or node.node_link, beta=1 / machine.network_bytes_per_s))
    row = {"scheme": name, "mesh": f"{data}×{model}", "hbm_gib": None, "hbm_fits": None}
    if compiled:
      step = experiment.lower_train_step(spec, num_classes=NUM_CLASSES,
                                         devices=gpu_topologies.mesh_devices(devices, data, model))
      program = step.lowered.compile()
      memory = program.memory_analysis()
      hbm = (memory.argument_size_in_bytes + memory.temp_size_in_bytes +
             memory.output_size_in_bytes - memory.alias_size_in_bytes)
      row.update(hbm_gib=round(hbm / 2**30, 2), hbm_fits=hbm <= gpu_topologies.JAX_MEMORY_FRACTION
                 * gpu_topologies.GPUS[machine.gpu].memory_bytes)
      transfers = gpu_topologies.time_model_transfers(
          program.as_text(), mesh=step.run.mesh, plan=plan, arch=arch,
          global_batch=machine.global_batch, image_size=machine.image_size,
          num_classes=NUM_CLASSES, dtype=machine.dtype, owt_variant=variant)
    else:
      crossing = ("data",) if machine.nodes > 1 and data > 1 else ()
      transfers = costmodel.analytic_transfers(
          arch, plan, global_batch=machine.global_batch, image_size=machine.image_size,
          num_classes=NUM_CLASSES, activation_bytes=2 if machine.dtype == "bfloat16" else 4,
          crossing_axes=crossing)
    t = costmodel.step_time(arch, plan, node, global_batch=machine.global_batch,
                            image_size=machine.image_size, num_classes=NUM_CLASSES,
                            dtype=machine.dtype, transfers=transfers, owt_variant=variant)
    sent = [costmodel.bytes_sent(x) for x in transfers]
    row.update(step_ms=round(1e3 * t["step_s"], 2), compute_ms=round(1e3 * t["compute_s"], 2),
               communication_ms=round(1e3 * t["communication_s"], 2),
               images_per_sec=round(machine.global_batch / t["step_s"]),
               mb_per_gpu=round(sum(sent) / 1e6, 1),
               mb_crossing_nodes=round(sum(b for b, x in zip(sent, transfers)
                                           if x.crosses_nodes) / 1e6, 1))
    rows.append(row)
  rows.sort(key=lambda r: (r["hbm_fits"] is False, -r["images_per_sec"]))  # unrounded order.
  return rows, refused


def measured_model(model: str) -> str:
  """The network whose one-GPU step on an H200 calibrates `model`'s compute: its own where
  docs/gpu.json has it, the one-column net for its sizes, else the two-column alexnet (whose FLOPs'
  share of the peak then stands in: `calibrated_node`)."""
  if model.startswith("alexnet_owt"):
    return "alexnet_owt"
  return model if any(r["model"] == model for r in gpu_topologies.one_gpu_rows()) else "alexnet"


# The GPUs whose compute the one-GPU steps in docs/gpu.json measured: the H200, and the H100, the
# same processor at the same peak (gpu_topologies.calibrated_node).
MEASURED_GPUS = ("h100", "h200")


def why(rows: list[dict]) -> str:
  """One sentence on why the best wins over the best of another scheme (the variants of one
  scheme often tie)."""
  best = rows[0]
  family = lambda r: r["scheme"].split()[0]
  others = [r for r in rows if family(r) != family(best)]
  if not others:
    return f"{best['scheme']} wins: no other scheme fits this machine."
  other = others[0]
  gap = other["images_per_sec"] / best["images_per_sec"]
  if gap > 1 - TIE:
    verdict = (f"{best['scheme']} and {other['scheme']} tie: {best['step_ms']} against "
               f"{other['step_ms']} ms a step, {100 * (1 - gap):.1f}% apart, inside the model's "
               "error; ")
  else:
    verdict = (f"{best['scheme']} wins: {best['step_ms']} ms a step against {other['step_ms']} "
               f"for the best {family(other)} ({other['scheme']}) — ")
  tied = [r["scheme"] for r in rows[1:] if family(r) == family(best)
           and r["images_per_sec"] / best["images_per_sec"] > 1 - TIE]
  if tied:
    verdict = (f"{', '.join(tied)} {'lies' if len(tied) == 1 else 'lie'} within {TIE:.0%} of "
               f"{best['scheme']}, inside the model's error: a tie. ") + verdict
  return (verdict + f"{best['compute_ms']} ms of compute "
          f"against {other['compute_ms']}, {best['communication_ms']} ms of communication not "
          f"hidden behind it against {other['communication_ms']}; {best['scheme']} sends "
          f"{best['mb_per_gpu']} MB per GPU ({best['mb_crossing_nodes']} across the nodes) "
          f"against {other['mb_per_gpu']} ({other['mb_crossing_nodes']}).")


def table(rows: list[dict]) -> str:
  return per_row(
      ("scheme", "{scheme}"), ("mesh", "{mesh}"), ("predicted step ms", "{step_ms}"),
      ("images/s", "{images_per_sec}"),
      ("HBM GiB per GPU (fits)", lambda r: "not compiled" if r["hbm_gib"] is None else
       f"{r['hbm_gib']} ({'yes' if r['hbm_fits'] else 'no'})"),
      ("MB sent per GPU", "{mb_per_gpu}"), ("MB across nodes", "{mb_crossing_nodes}"))(rows)


def main(argv):
  del argv
  machine = Described(_GPU.value, _PER_NODE.value, _NODES.value, _NETWORK.value * 1e9,
                      _MODEL.value, _BATCH.value, _DTYPE.value, _IMAGE_SIZE.value)
  check(machine)
  not_compiled = "--analytic" if _ANALYTIC.value else gpu_topologies.unavailable_reason(machine.gpu)
  compiled = not_compiled is None
  if compiled:  # compile-only GPUs: no GPU to tune kernels on (gpu_topologies.py says why).
    gpu_topologies.without_sharded_autotuning()
  platforms.start(cpu_devices=8)
  rows, refused = rank(machine, compiled=compiled)
  if not rows:
    raise SystemExit(f"error: no scheme fits {machine.gpus_per_node * machine.nodes} GPUs at "
                     f"global batch {machine.global_batch} ({refused[0]['reason']}).")
  if _JSON.value:
    print(json.dumps({"compiled": compiled, "rows": rows, "refused": refused}, indent=1))
    return
  print(f"{machine.nodes} × {machine.gpus_per_node} {hardware.DEVICES[machine.gpu].name} on "
        f"{hardware.NODE_LINKS[machine.gpu].name}, {_NETWORK.value:g} GB/s per GPU between "
        f"nodes; {machine.model}, {machine.dtype}, global batch {machine.global_batch}; "
        + ("compiled for the machine's GPUs." if compiled else
           f"analytic bytes, every transfer exposed, HBM unknown: {not_compiled}.")
        + ("" if machine.model.startswith(measured_model(machine.model)) else
           f" No one-GPU {machine.model} step was measured: its FLOPs run at the share of the "
           f"peak the H200's {measured_model(machine.model)} steps reached.")
        + ("" if machine.gpu in MEASURED_GPUS else
           f" No {hardware.DEVICES[machine.gpu].name} step was measured: its compute is the "
           f"H200's measured share of this GPU's own peak, an assumption (read the ranking, not "
           f"the times)."))
  print(table(rows))
  print(why(rows))
  for r in refused:
    print(f"not possible: {r['scheme']}: {r['reason']}", file=sys.stderr)


if __name__ == "__main__":
  app.run(main)
