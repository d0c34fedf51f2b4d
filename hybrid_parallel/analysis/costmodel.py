"""The one model of a training step: per-layer FLOPs, the bytes each scheme must move, and the
time a step takes on a described machine (analysis/hardware.py).

Conventions: 1 multiply-add = 2 FLOPs; training = 3 × forward (backward = 2 × forward). Bytes are
what one device sends per step with bandwidth-optimal collectives: an all-reduce of n bytes over
p devices sends 2(p−1)/p·n, an activation all-gather (forward) plus the reduce-scatter of its
gradient (backward) send 2(p−1)/p·n together (n = the gathered tensor).

Collective times (Thakur, Rabenseifner & Gropp 2005; α latency, β s/byte, γ s/byte reduced):
  ring              2(p−1)α + 2n(p−1)/p·β + n(p−1)/p·γ
  butterfly         2 lg p·α + 2n(p−1)/p·β + n(p−1)/p·γ      (Rabenseifner halving-doubling)
  tree              2⌈lg p⌉·(α + nβ) + ⌈lg p⌉·nγ             (binomial reduce + broadcast)
  parameter_server  2(p−1)·(α + nβ) + (p−1)·nγ               (serialised at the root)
  psum              as ring (what NCCL and most runtimes use for large messages)
  kvstore_device    MXNet's kvstore 'device' (`kvstore_device_time`): each key summed on one GPU,
                    every pair at once, peer to peer; the busiest PCIe link sets the time

Across nodes with one network card per node (`Machine.network_per_node`, Goyal et al.'s servers) a
sum runs in three phases: within each node (a ring on its links), across the nodes (the chosen
algorithm, one process per node), back within each node.

A step (`step_time`): each device's compute — its layers' FLOPs at its local batch and widths, at
the machine's calibrated share of the peak (its convolutions at the rate its code's kernels reach
at the device's batch, where the machine describes one: `hardware.ConvKernels`), plus a fixed
per-step time — and each transfer, on the link it crosses, as the machine's implementation moves
it (`hardware.Machine`: staged through the host, parameters sent back, uplinks shared, halves
joined through host memory); a transfer XLA schedules while compute runs
(`Transfer.overlapped`) costs only what outlasts the compute, and owt's (b)/(c) passes hide their
transfers behind the FC compute of the pass before. The frameworks of 2016–2017 (MXNet's engine,
Caffe2 with Gloo) overlap differently: each layer's gradient is exchanged as soon as backprop has
produced it, one exchange after another (`schedule="backprop"`, `backprop_exposed`).
"""

import dataclasses
import math

from hybrid_parallel import models, partitioning
from hybrid_parallel.analysis.hardware import Link, Machine


def allreduce_time(algorithm: str, n: float, p: int, *, link: Link) -> float:
  """Seconds for a sum all-reduce of `n` bytes over `p` devices (module docstring formulas)."""
  if p <= 1:
    return 0.0
  a, b, g = link.alpha, link.beta, link.gamma
  lg = math.ceil(math.log2(p))
  if algorithm in ("ring", "psum"):
    return 2 * (p - 1) * a + 2 * n * (p - 1) / p * b + n * (p - 1) / p * g
  if algorithm == "butterfly":
    return 2 * lg * a + 2 * n * (p - 1) / p * b + n * (p - 1) / p * g
  if algorithm == "tree":
    return 2 * lg * (a + n * b) + lg * n * g
  if algorithm == "parameter_server":
    return 2 * (p - 1) * (a + n * b) + (p - 1) * n * g
  raise ValueError(f"unknown algorithm {algorithm!r}")


def gather_scatter_time(n: float, p: int, link: Link) -> float:
  """Forward all-gather of an n-byte tensor plus the backward reduce-scatter of its gradient."""
  if p <= 1:
    return 0.0
  return 2 * (p - 1) * link.alpha + 2 * n * (p - 1) / p * link.beta + n * (p - 1) / p * link.gamma


def kvstore_device_time(n: float, p: int, machine: Machine) -> float:
  """Seconds for MXNet's kvstore 'device' to sum an n-byte key over p GPUs of `machine` and give
  every GPU the sum (src/kvstore/comm.h, CommDevice: the key's sum lives on one GPU, the keys spread
  over the GPUs by size; every other GPU copies its gradient there, the sum is copied back to each,
  peer to peer). Summed over keys, each GPU's link carries 2(p − 1)/p·n per direction, and the one
  link above a group of k of the p GPUs (`Machine.switch_groups`) 2k(p − k)/p·n: the busiest sets
  the time. A key is two copies one after the other (in, then back): 2α; its sum (p − 1)/p·n·γ on
  average."""
  if p <= 1:
    return 0.0
  link = machine.node_link
  busiest = max([2 * (p - 1) / p] + [2 * k * (p - k) / p for k in machine.switch_groups if k < p])
  return 2 * link.alpha + busiest * n * link.beta + (p - 1) / p * n * link.gamma


def latency_from_speedup(speedup: float, *, p: int, buffer_bytes: list[float],
                         link: Link) -> float:
  """The latency α per message at which recursive halving and doubling ("butterfly") sums each of
  `buffer_bytes` over p processes `speedup` times as fast as the ring does on `link` (α ignored):
  both send the same bytes (module docstring), so only their 2(p − 1) and 2 lg p messages differ.
  With W the buffers' bytes-and-sum time and K their number, S = (2(p − 1)Kα + W) / (2 lg p·Kα + W)
  gives α = (S − 1)·W / (K·(2(p − 1) − 2S·lg p))."""
  bandwidth = dataclasses.replace(link, alpha=0.0)
  w = sum(allreduce_time("ring", n, p, link=bandwidth) for n in buffer_bytes)
  messages = 2 * (p - 1) - 2 * speedup * math.ceil(math.log2(p))
  if messages <= 0:
    raise ValueError(f"halving and doubling cannot be {speedup}× the ring on {p} processes by "
                     "latency alone")
  return (speedup - 1) * w / (len(buffer_bytes) * messages)


def backprop_exposed(backward_s: list[float], exchange_s: list[float]) -> float:
  """Seconds of gradient exchange left after backprop ends, when each layer's exchange starts as
  soon as backprop has produced its gradient and the exchanges run one at a time: both lists in
  the layers' forward order (backprop runs them last first)."""
  computed = exchanged = 0.0
  for backward, exchange in zip(reversed(backward_s), reversed(exchange_s)):
    computed += backward
    exchanged = max(exchanged, computed) + exchange
  return max(0.0, exchanged - computed)


@dataclasses.dataclass(frozen=True)
class Layer:
  """One layer's arithmetic for a batch of one image."""
  name: str
  kind: str  # "conv" or "fc"
  params: int
  macs: int  # forward multiply-adds
  input_values: int  # values of the layer's input (what a model-parallel layer may gather)
  # Channels of the batch norms that go with it: each keeps running statistics (mean and
  # variance) that the devices of its batch average every step (layers.BatchNorm).
  norm_channels: int = 0


def layers(arch: models.Architecture | models.ResNetArchitecture, image_size: int,
           num_classes: int) -> list[Layer]:
  """Per-layer parameters, MACs and input sizes of the single-device network."""
  if isinstance(arch, models.ResNetArchitecture):
    return _resnet_layers(arch, image_size, num_classes)
  out, side, channels = [], image_size, 3
  for c in arch.convs:
    groups = arch.columns if c.within_column else 1
    out_side = (side + 2 * c.padding - c.kernel) // c.stride + 1
    weights = c.kernel * c.kernel * (channels // groups) * c.features
    # A bias, or (AlexNet-BN) the batch norm's scale and shift in its place.
    extra, norm = (2 * c.features, c.features) if arch.batch_norm else (c.features, 0)
    out.append(Layer(c.name, "conv", weights + extra, out_side ** 2 * weights,
                     side * side * channels, norm_channels=norm))
    side, channels = ((out_side - 3) // 2 + 1 if c.pool else out_side), c.features
  width = side * side * channels
  for name, features in zip(arch.fc_names(), arch.hidden + (num_classes,)):
    out.append(Layer(name, "fc", width * features + features, width * features, width))
    width = features
  return out


def _resnet_layers(arch: models.ResNetArchitecture, image_size: int,
                   num_classes: int) -> list[Layer]:
  """A residual network's convs (each with the scale and shift of the batch norm beside it) and
  its classifier; the input batch norm of a pre-activation net is counted with the stem. Batch
  norm, ReLU, pooling and the shortcut sums are not counted as MACs (as AlexNet's LRN and pools
  are not)."""
  out = []
  for conv in arch.conv_layers(image_size):
    weights = conv.kernel * conv.kernel * conv.in_channels * conv.features
    # Post-activation: a batch norm after every conv; pre-activation: before each block's convs
    # (over their inputs' channels), the input's (its shift only) and the last one.
    channels = (conv.features if not arch.preactivation else
                conv.in_channels if not conv.name.endswith("shortcut") else 0)
    norm = 2 * channels
    if arch.preactivation and conv.name == "conv1":
      norm = conv.in_channels  # the input batch norm: a shift per image channel, no scale.
    out.append(Layer(conv.name, "conv", weights + norm, conv.out_side ** 2 * weights,
                     conv.in_side ** 2 * conv.in_channels, norm_channels=channels))
  if arch.preactivation:  # the batch norm after the last block.
    out[-1] = dataclasses.replace(out[-1], params=out[-1].params + 2 * arch.widths[-1],
                                  norm_channels=out[-1].norm_channels + arch.widths[-1])
  width = arch.widths[-1]
  out.append(Layer("fc", "fc", width * num_classes + num_classes, width * num_classes, width))
  return out


def training_flops_per_image(arch, image_size, num_classes) -> float:
  return 6.0 * sum(layer.macs for layer in layers(arch, image_size, num_classes))


@dataclasses.dataclass
class Traffic:
  """Bytes one device sends per step, by purpose."""
  gradients: float = 0.0  # gradient all-reduce over the batch axes
  activations: float = 0.0  # model-parallel activation exchange (forward + backward)
  statistics: float = 0.0  # batch norm's running statistics averaged over the batch axes

  @property
  def total(self) -> float:
    return self.gradients + self.activations + self.statistics


def _axes_size(plan: partitioning.Plan, axes) -> int:
  return math.prod({"data": plan.data, "model": plan.model}[a] for a in axes)


def _transfers(arch, plan, global_batch, image_size, num_classes, bytes_per_value):
  """(purpose, kind, n bytes, p devices) of every collective a scheme needs per step."""
  lay = plan.layout
  conv_batch = global_batch // plan.batch_divisor
  fc_batch = global_batch // plan.data
  per_layer = layers(arch, image_size, num_classes)
  transfers = []
  for layer in per_layer:
    shards = lay.conv_shards if layer.kind == "conv" else lay.fc_shards
    axes = plan.conv_batch_axes if layer.kind == "conv" else plan.fc_batch_axes
    transfers.append(("gradients", "allreduce", layer.params / shards * bytes_per_value,
                      _axes_size(plan, axes)))
  transfers += [("statistics", "allreduce", 2 * layer.norm_channels / lay.conv_shards * 4,
                 _axes_size(plan, plan.conv_batch_axes))
                for layer in per_layer if layer.norm_channels]
  if isinstance(arch, models.ResNetArchitecture):
    return transfers + _resnet_activations(arch, per_layer, plan, conv_batch, fc_batch,
                                           num_classes, bytes_per_value)
  convs = {c.name: c for c in arch.convs}
  m = plan.model
  for i, layer in enumerate(per_layer):
    needs_all_channels = layer.kind == "conv" and not convs[layer.name].within_column
    if needs_all_channels and i > 0 and lay.conv_shards > 1:
      transfers.append(("activations", "gather", conv_batch * layer.input_values * bytes_per_value,
                        m))
  fc_layers = [layer for layer in per_layer if layer.kind == "fc"]
  features = fc_layers[0].input_values
  if lay.conv_shards > 1:  # channels of the last conv stage, gathered for fc6
    transfers.append(("activations", "gather", conv_batch * features * bytes_per_value, m))
  if lay.conv_batch_over_model:  # one weird trick: the data group's batch, gathered for fc6
    transfers.append(("activations", "gather", fc_batch * features * bytes_per_value, m))
  if lay.fc_shards > 1:
    for layer in fc_layers[1:-1]:  # fc7's input: fc6's neurons from every model device
      transfers.append(("activations", "gather", fc_batch * layer.input_values * bytes_per_value,
                        m))
    transfers.append(("activations", "allreduce", fc_batch * num_classes * bytes_per_value, m))
  return transfers


def _resnet_activations(arch, per_layer, plan, conv_batch, fc_batch, num_classes,
                        bytes_per_value):
  """A residual network's activation collectives (models.ResNet): with filters over "model",
  every conv's input is gathered but the stem's (the image is whole everywhere) and a shortcut's
  (it shares its block's first gather); the pooled channels stay split, each device's rows of the
  classifier give partial logits, summed over "model". Under owt the pooled features of the data
  group's batch are gathered before the classifier instead. A pre-activation net's input batch
  norm has a shift, whose gradient needs the image's: each model device's part of it (through its
  filters of the stem) is summed over "model", the whole image-sized tensor."""
  m, lay = plan.model, plan.layout
  out = []
  if lay.conv_shards > 1:
    out += [("activations", "gather", conv_batch * layer.input_values * bytes_per_value, m)
            for layer in per_layer[1:] if layer.kind == "conv"
            and not layer.name.endswith("shortcut")]
    if arch.preactivation:
      out.append(("activations", "allreduce",
                  conv_batch * per_layer[0].input_values * bytes_per_value, m))
  if lay.conv_batch_over_model:
    out.append(("activations", "gather", fc_batch * per_layer[-1].input_values * bytes_per_value,
                m))
  if lay.fc_shards > 1:
    out.append(("activations", "allreduce", fc_batch * num_classes * bytes_per_value, m))
  return out


def traffic(arch, plan, *, global_batch: int, image_size: int, num_classes: int,
            bytes_per_value: int = 4) -> Traffic:
  """The minimum bytes one device sends per step under `plan` (see the module docstring)."""
  result = Traffic()
  for purpose, _, n, p in _transfers(arch, plan, global_batch, image_size, num_classes,
                                     bytes_per_value):
    if p > 1:
      setattr(result, purpose, getattr(result, purpose) + 2 * (p - 1) / p * n)
  return result


def compute_flops_per_device(arch, plan, *, global_batch: int, image_size: int,
                             num_classes: int) -> float:
  """Training FLOPs one device performs per step under `plan`."""
  return sum(flops_by_kind(arch, plan, global_batch=global_batch, image_size=image_size,
                           num_classes=num_classes).values())


def flops_by_kind(arch, plan, *, global_batch: int, image_size: int,
                  num_classes: int) -> dict[str, float]:
  """Training FLOPs one device performs per step under `plan`: {"conv": …, "fc": …}."""
  conv_batch = global_batch / plan.batch_divisor
  fc_batch = global_batch / plan.data
  total = {"conv": 0.0, "fc": 0.0}
  for layer in layers(arch, image_size, num_classes):
    if layer.kind == "conv":
      total["conv"] += 6.0 * layer.macs * conv_batch / plan.layout.conv_shards
    else:
      total["fc"] += 6.0 * layer.macs * fc_batch / plan.layout.fc_shards
  return total


@dataclasses.dataclass(frozen=True)
class Transfer:
  """One collective of a step, as the time model charges it.

  Attributes:
    purpose: "gradients", "activations" or "statistics" (batch norm's running averages).
    kind: "allreduce", or "gather" (a forward all-gather and the backward reduce-scatter of its
      gradient, together), or "sent" (a collective read from a compiled program: `bytes` is what
      each device sends, the algorithm's choice made already).
    bytes: n, the summed or gathered tensor (or, for "sent", each device's bytes).
    devices: p, the devices in each group.
    crosses_nodes: its groups join devices of different nodes (it runs on the network).
    overlapped: XLA runs it beside a convolution or matrix product (hlo_stats.overlapped).
  """
  purpose: str
  kind: str
  bytes: float
  devices: int
  crosses_nodes: bool = False
  overlapped: bool = False


def analytic_transfers(arch, plan, *, global_batch: int, image_size: int, num_classes: int,
                       bytes_per_value: int = 4, activation_bytes: int | None = None,
                       crossing_axes: tuple[str, ...] = ()) -> list[Transfer]:
  """The minimum transfers of a step (those the compiled programs were shown to send), gradients
  in `bytes_per_value`, activations in `activation_bytes` (default the same); a transfer over a
  mesh axis in `crossing_axes` crosses nodes."""
  activation_bytes = activation_bytes or bytes_per_value
  crossing = {"gradients": any(axis in crossing_axes for axis in plan.conv_batch_axes),
              "activations": "model" in crossing_axes}
  crossing["statistics"] = crossing["gradients"]
  return [Transfer(purpose, kind, n * (activation_bytes / bytes_per_value
                                       if purpose == "activations" else 1), p,
                   crosses_nodes=crossing[purpose])
          for purpose, kind, n, p in _transfers(arch, plan, global_batch, image_size,
                                                num_classes, bytes_per_value) if p > 1]


def compute_time(arch, plan, machine: Machine, *, global_batch: int, image_size: int,
                 num_classes: int, dtype: str = "float32") -> float:
  """Seconds one device computes per step: its FLOPs at the machine's calibrated share of the
  peak — its convolutions at the rate the machine's code reaches at the device's batch
  (`Machine.conv_rate`; the FC layers' matrix products have no published curve and keep the
  calibrated rate) — plus its fixed per-step time."""
  flops = flops_by_kind(arch, plan, global_batch=global_batch, image_size=image_size,
                        num_classes=num_classes)
  rate = machine.device.peak_flops[dtype] * machine.efficiency
  conv_rate = machine.conv_rate(global_batch // plan.batch_divisor)
  return machine.step_overhead_s + (flops["conv"] / conv_rate + flops["fc"]) / rate


def transfer_time(transfer: Transfer, machine: Machine, *, algorithm: str = "ring") -> float:
  """Seconds of one transfer on the link it crosses, as the machine's implementation moves it."""
  n, p = transfer.bytes, transfer.devices
  if transfer.crosses_nodes and machine.network_per_node and transfer.kind == "allreduce":
    per_node = machine.devices_per_node  # within each node and back, then among the nodes.
    return (allreduce_time("ring", n, per_node, link=machine.node_link) +
            allreduce_time(algorithm, n, p // per_node, link=machine.network))
  if algorithm == "kvstore_device" and transfer.kind == "allreduce" and not transfer.crosses_nodes:
    return kvstore_device_time(n, p, machine)
  if transfer.crosses_nodes:
    link = machine.network
  else:
    link, share = machine.link_between(p), min(machine.devices_per_uplink, p)
    if machine.sends_parameters and transfer.purpose == "gradients":
      # To the host and back, every device at once on its own uplink; the host sums p of them.
      host = machine.host_memory.gamma if machine.host_memory else 0.0
      return 2 * (machine.node_link.alpha + n * share * machine.node_link.beta) + (p + 1) * n * host
  if transfer.kind == "sent":
    return link.alpha + n * link.beta
  if transfer.kind == "allreduce":
    return allreduce_time(algorithm, n, p, link=link)
  return gather_scatter_time(n, p, link)


def step_time(arch, plan, machine: Machine, *, global_batch: int, image_size: int,
              num_classes: int, dtype: str = "float32", transfers: list[Transfer] | None = None,
              algorithm: str = "ring", owt_variant: str = "a",
              fc_updates_per_step: int = 1, schedule: str = "program") -> dict:
  """Predicted seconds of one step of `plan` on `machine` (module docstring).

  Args:
    transfers: the step's collectives (read from its compiled program, say); default its
      analytic minimum in `dtype`'s width for the activations, float32 for the gradients.
    owt_variant, fc_updates_per_step: owt's FC stage as Krizhevsky's (b) or (c) passes, with an
      FC update per pass (his variable batch size) when `fc_updates_per_step` = K.
    schedule: "program" — a transfer marked `overlapped` hides behind the step's compute (XLA's
      schedule); "backprop" — each layer's gradient exchange starts when backprop has produced it,
      one after another (MXNet's engine, Caffe2 with Gloo: `backprop_exposed`); it takes the
      analytic transfers, one gradient sum per layer.

  Returns:
    compute_s, communication_s (what of it is not hidden), step_s.
  """
  compute = compute_time(arch, plan, machine, global_batch=global_batch, image_size=image_size,
                         num_classes=num_classes, dtype=dtype)
  if transfers is None:
    transfers = analytic_transfers(arch, plan, global_batch=global_batch, image_size=image_size,
                                   num_classes=num_classes,
                                   activation_bytes=2 if dtype == "bfloat16" else 4)
  if prices_owt_passes(plan, owt_variant):
    if any(t.purpose not in ("gradients", "activations", "statistics") for t in transfers):
      # The pass model splits the transfers by purpose; a program's collectives have none, and
      # would be dropped from the step (they were, once: owt (c) across two nodes at 2.12 ms).
      raise ValueError("owt's (b)/(c) pass model prices transfers by purpose: give it "
                       "analytic_transfers, not a compiled program's collectives")
    return _owt_passes(arch, plan, machine, compute=compute, transfers=transfers,
                       global_batch=global_batch, image_size=image_size,
                       num_classes=num_classes, dtype=dtype, algorithm=algorithm,
                       variant=owt_variant, fc_updates_per_step=fc_updates_per_step)
  if schedule == "backprop":
    backward = backward_time_by_layer(arch, plan, machine, global_batch=global_batch,
                                      image_size=image_size, num_classes=num_classes, dtype=dtype)
    gradients = [t for t in transfers if t.purpose == "gradients"]
    if len(gradients) != len(backward):
      raise ValueError("the backprop schedule takes one gradient sum per layer "
                       f"(analytic_transfers): {len(gradients)} for {len(backward)} layers")
    exposed = backprop_exposed(
        backward, [transfer_time(t, machine, algorithm=algorithm) for t in gradients])
    rest = sum(transfer_time(t, machine, algorithm=algorithm) for t in transfers
               if t.purpose != "gradients")
    return {"compute_s": compute, "communication_s": exposed + rest,
            "step_s": compute + exposed + rest}
  if schedule != "program":
    raise ValueError(f"unknown schedule {schedule!r}; choose program or backprop")
  return with_transfers(compute, transfers, machine, algorithm=algorithm)


def backward_time_by_layer(arch, plan, machine: Machine, *, global_batch: int, image_size: int,
                           num_classes: int, dtype: str = "float32") -> list[float]:
  """Seconds of each layer's backprop on one device (forward order): two thirds of its training
  FLOPs, at the rates `compute_time` charges them."""
  rate = machine.device.peak_flops[dtype] * machine.efficiency
  conv_rate = machine.conv_rate(global_batch // plan.batch_divisor)
  seconds = []
  for layer in layers(arch, image_size, num_classes):
    if layer.kind == "conv":
      flops = 4.0 * layer.macs * global_batch / plan.batch_divisor / plan.layout.conv_shards
      seconds.append(flops / conv_rate / rate)
    else:
      seconds.append(4.0 * layer.macs * global_batch / plan.data / plan.layout.fc_shards / rate)
  return seconds


def bytes_sent(transfer: Transfer) -> float:
  """What one device sends for `transfer`: as read from a program, or the analytic figure (an
  all-reduce, or a gather with its reduce-scatter, each 2(p − 1)/p · n)."""
  if transfer.kind == "sent":
    return transfer.bytes
  return 2 * (transfer.devices - 1) / transfer.devices * transfer.bytes


def prices_owt_passes(plan, owt_variant: str) -> bool:
  """Whether step_time prices `plan` by owt's FC passes (_owt_passes) rather than one stage."""
  return plan.layout.conv_batch_over_model and owt_variant != "a" and plan.model > 1


def with_transfers(compute_s: float, transfers: list[Transfer], machine: Machine, *,
                   algorithm: str = "ring") -> dict:
  """A step of `compute_s` seconds (predicted, or measured on a mocked topology, whose
  collectives do not run) and its `transfers` on `machine`: what is not overlapped adds to the
  compute, what is overlapped only where it outlasts it."""
  exposed = sum(transfer_time(t, machine, algorithm=algorithm) for t in transfers
                if not t.overlapped)
  hidden = sum(transfer_time(t, machine, algorithm=algorithm) for t in transfers
               if t.overlapped)
  communication = exposed + max(0.0, hidden - compute_s)
  return {"compute_s": compute_s, "communication_s": communication,
          "step_s": compute_s + communication}


def roofline_floors(*, flops: float, bytes_accessed: float, bytes_sent: float, peak_flops: float,
                    hbm_bytes_per_s: float | None,
                    link_bytes_per_s: float | None) -> dict[str, float]:
  """Lower bounds on a compiled program's step where no step of the device was ever timed (the
  compile-only TPUs: nothing to calibrate on): its FLOPs at the stated peak, the bytes it
  accesses at the HBM bandwidth and the bytes it sends at the interconnect's, each where the
  device's bandwidth is known. The largest is the roofline estimate."""
  floors = {"flops / stated peak": flops / peak_flops}
  if hbm_bytes_per_s:
    floors["bytes accessed / HBM bandwidth"] = bytes_accessed / hbm_bytes_per_s
  if link_bytes_per_s:
    floors["collective bytes / ICI bandwidth"] = bytes_sent / link_bytes_per_s
  return floors


def _owt_passes(arch, plan, machine: Machine, *, compute: float, transfers: list[Transfer],
                global_batch, image_size, num_classes, dtype, algorithm, variant,
                fc_updates_per_step) -> dict:
  """owt with its FC stage in K passes (Krizhevsky's (b) and (c)): the conv stage and its
  gradient sum as in (a); in pass k + 1 the features travel while pass k's FC layers compute, so
  the FC stage takes x + f + (K − 1)·max(f, x + y) + y for a pass's forward transfer x, FC
  compute f and backward transfer y. (b) sends each worker's rows to the others one message after
  another; (c) all-gathers a K-th of every worker's rows. With `fc_updates_per_step` = K the FC
  gradients are all-reduced over "data" after every pass."""
  k = plan.model
  per_layer = layers(arch, image_size, num_classes)
  fc_flops = sum(6.0 * layer.macs * global_batch / plan.data / k
                 for layer in per_layer if layer.kind == "fc")
  fc_compute = fc_flops / (machine.device.peak_flops[dtype] * machine.efficiency)
  width = 2 if dtype == "bfloat16" else 4
  # The first FC layer's gathered rows (AlexNet's fc6; a residual network's classifier).
  first_fc = next(layer for layer in per_layer if layer.kind == "fc")
  features = global_batch / plan.data * first_fc.input_values * width
  gradients = [t for t in transfers if t.purpose == "gradients"]
  fc_gradients = [t for t in gradients if t.devices == plan.data]
  conv_gradients = [t for t in gradients if t not in fc_gradients]
  inner = sum(transfer_time(t, machine, algorithm=algorithm) for t in transfers
              if t.purpose == "activations" and t.bytes != features)
  x = y = pass_copy_time(features / k, k, machine, variant=variant)
  f = (fc_compute + inner) / k
  fc_stage = x + f + (k - 1) * max(f, x + y) + y
  sums = (sum(transfer_time(t, machine, algorithm=algorithm) for t in conv_gradients
              + [t for t in transfers if t.purpose == "statistics"]) +
          fc_updates_per_step * sum(transfer_time(t, machine, algorithm=algorithm)
                                    for t in fc_gradients))
  conv_compute = compute - fc_compute
  return {"compute_s": compute, "communication_s": fc_stage - fc_compute + sums,
          "step_s": conv_compute + fc_stage + sums}


def pass_copy_time(n: float, k: int, machine: Machine, *, variant: str) -> float:
  """Seconds of one owt FC pass's forward copy, `n` bytes = one worker's rows of fc6's input, over
  `k` workers: (b) one message to each other worker, one after another — to those under its own
  CPU on the link within a half, to the others on the link between the halves; (c) an all-gather
  of a k-th of every worker's rows (half of `gather_scatter_time`: its forward)."""
  if variant == "b":
    near = min(k, machine.devices_per_socket or k) - 1
    within, between = machine.link_between(near + 1), machine.link_between(k)
    return (near * (within.alpha + n * within.beta) +
            (k - 1 - near) * (between.alpha + n * between.beta))
  return gather_scatter_time(n, k, machine.link_between(k)) / 2


# How the replicas of a local-SGD scheme meet (local_sgd/): the exchange each sync makes.
EXCHANGES = ("allreduce", "ring", "butterfly", "hopping_ring", "parameter_server")


def local_sgd_traffic(arch, *, replicas: int, exchange: str, image_size: int, num_classes: int,
                      with_momentum: bool = True) -> dict:
  """Bytes one replica sends when local-SGD replicas meet (float32 parameters of n bytes, and as
  many of momentum when `with_momentum`).

  `per_sync`: averaging by all-reduce or ring 2(p−1)/p·n; one butterfly or hopping-ring stage: n
  (to one partner); A-SGD's push, emulated as an all-reduce of the pushing clients' changes:
  2(p−1)/p·n. `in_program`: every branch of the step's meeting counted once, as a compiled
  program lists them — butterfly and hopping ring hold ⌈lg p⌉ stages of which one runs per sync,
  A-SGD a warm-start branch (the first client's parameters and momentum, all-reduced) beside its
  push.
  """
  n = _parameter_bytes(arch, image_size, num_classes)
  mixed = n * (2 if with_momentum else 1)
  ring = 2 * (replicas - 1) / replicas
  stages = max(1, math.ceil(math.log2(replicas)))
  if exchange in ("allreduce", "ring"):
    per_sync = in_program = ring * mixed
  elif exchange in ("butterfly", "hopping_ring"):
    per_sync, in_program = mixed, stages * mixed
  elif exchange == "parameter_server":
    per_sync, in_program = ring * n, ring * (n + 2 * n)
  else:
    raise ValueError(f"unknown exchange {exchange!r}; choose from {', '.join(EXCHANGES)}")
  return {"per_sync": per_sync, "in_program": in_program}


def _parameter_bytes(arch, image_size: int, num_classes: int) -> float:
  """The model's float32 parameters, in bytes."""
  return 4 * sum(layer.params for layer in layers(arch, image_size, num_classes))


def local_sgd_step_time(arch, machine: Machine, *, replicas: int, batch_per_replica: int,
                        image_size: int, num_classes: int, every: int, exchange: str,
                        with_momentum: bool = True, dtype: str = "float32") -> dict:
  """Seconds per step of model averaging or A-SGD: each replica's own SGD step, plus its meeting
  every `every` steps, spread over them.

  Args:
    exchange: "allreduce" or "ring" — the replicas' parameters all-reduced (the exact mean);
      "butterfly" or "hopping_ring" — each replica sends its model to one partner and receives
      its partner's (one stage per sync); "parameter_server" — A-SGD: each client pushes its
      change and fetches the server's parameters, n bytes each way, and the server's one link
      carries every client's (Paine et al.: the server is one process on another node).
    with_momentum: averaging mixes the momentum buffers with the parameters (the config's
      `average_momentum`), so a meeting moves twice the float32 parameters; A-SGD moves the
      parameters only.

  Returns:
    compute_s, communication_s (per step), step_s, and server_bound (A-SGD: whether the
    server's link, not the clients, sets the pace).
  """
  single = partitioning.make_plan("single", 1, 1)
  compute = compute_time(arch, single, machine, global_batch=batch_per_replica,
                         image_size=image_size, num_classes=num_classes, dtype=dtype)
  n = _parameter_bytes(arch, image_size, num_classes)
  if with_momentum and exchange != "parameter_server":
    n *= 2
  crosses = machine.nodes > 1
  link = machine.network if crosses else machine.node_link
  server_bound = False
  if exchange in ("allreduce", "ring"):
    meeting = transfer_time(Transfer("parameters", "allreduce", n, replicas, crosses), machine)
  elif exchange in ("butterfly", "hopping_ring"):
    meeting = transfer_time(Transfer("parameters", "sent", n, replicas, crosses), machine)
  elif exchange == "parameter_server":
    # The client copies its change off the device and the parameters back (when staged), and
    # sends and receives n over the network; the server's link takes 2n from every client.
    staged = (2 * (machine.node_link.alpha + n * machine.node_link.beta)
              if machine.host_staged and crosses else 0.0)
    meeting = staged + 2 * (link.alpha + n * link.beta)
    server = replicas * 2 * (link.alpha + n * link.beta)
    if server > every * compute + meeting:
      server_bound = True
      meeting = server - every * compute
  else:
    raise ValueError(f"unknown exchange {exchange!r}; choose from {', '.join(EXCHANGES)}")
  communication = meeting / every
  return {"compute_s": compute, "communication_s": communication,
          "step_s": compute + communication, "server_bound": server_bound}
