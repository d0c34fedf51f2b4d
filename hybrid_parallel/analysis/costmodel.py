"""Analytic cost of a training step: per-layer FLOPs, the traffic each scheme needs, α-β times.

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
"""

import dataclasses
import math

from hybrid_parallel import models, partitioning

@dataclasses.dataclass(frozen=True)
class Link:
  """An interconnect in the α-β-γ model."""
  name: str
  alpha: float  # seconds per message
  beta: float  # seconds per byte sent
  gamma: float = 0.0  # seconds per byte reduced


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


@dataclasses.dataclass(frozen=True)
class Layer:
  """One layer's arithmetic for a batch of one image."""
  name: str
  kind: str  # "conv" or "fc"
  params: int
  macs: int  # forward multiply-adds
  input_values: int  # values of the layer's input (what a model-parallel layer may gather)


def layers(arch: models.Architecture, image_size: int, num_classes: int) -> list[Layer]:
  """Per-layer parameters, MACs and input sizes of the single-device network."""
  out, side, channels = [], image_size, 3
  for c in arch.convs:
    groups = arch.columns if c.within_column else 1
    out_side = (side + 2 * c.padding - c.kernel) // c.stride + 1
    weights = c.kernel * c.kernel * (channels // groups) * c.features
    out.append(Layer(c.name, "conv", weights + c.features, out_side ** 2 * weights,
                     side * side * channels))
    side, channels = ((out_side - 3) // 2 + 1 if c.pool else out_side), c.features
  width = side * side * channels
  for name, features in zip(arch.fc_names(), arch.hidden + (num_classes,)):
    out.append(Layer(name, "fc", width * features + features, width * features, width))
    width = features
  return out


def training_flops_per_image(arch, image_size, num_classes) -> float:
  return 6.0 * sum(layer.macs for layer in layers(arch, image_size, num_classes))


@dataclasses.dataclass
class Traffic:
  """Bytes one device sends per step, by purpose."""
  gradients: float = 0.0  # gradient all-reduce over the batch axes
  activations: float = 0.0  # model-parallel activation exchange (forward + backward)

  @property
  def total(self) -> float:
    return self.gradients + self.activations


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
  conv_batch = global_batch / plan.batch_divisor
  fc_batch = global_batch / plan.data
  total = 0.0
  for layer in layers(arch, image_size, num_classes):
    if layer.kind == "conv":
      total += 6.0 * layer.macs * conv_batch / plan.layout.conv_shards
    else:
      total += 6.0 * layer.macs * fc_batch / plan.layout.fc_shards
  return total


def step_time(arch, plan, *, global_batch: int, image_size: int, num_classes: int,
              flops_per_second: float, link: Link, algorithm: str = "ring",
              bytes_per_value: int = 4) -> dict:
  """Predicted seconds per step: compute + communication (no overlap), by part."""
  compute = compute_flops_per_device(arch, plan, global_batch=global_batch,
                                     image_size=image_size,
                                     num_classes=num_classes) / flops_per_second
  comm = 0.0
  for _, kind, n, p in _transfers(arch, plan, global_batch, image_size, num_classes,
                                  bytes_per_value):
    comm += (allreduce_time(algorithm, n, p, link=link) if kind == "allreduce"
             else gather_scatter_time(n, p, link))
  return {"compute_s": compute, "communication_s": comm, "step_s": compute + comm}


def owt_step_time(arch, plan, *, global_batch: int, image_size: int, num_classes: int,
                  flops_per_second: float, link: Link, variant: str = "a",
                  fc_updates_per_step: int = 1, algorithm: str = "ring",
                  bytes_per_value: int = 4) -> dict:
  """Predicted seconds per step of `owt` with the FC stage run as `variant` (a, b or c).

  The conv stage and the gradient all-reduces are `step_time`'s. The FC stage differs:
    (a) the data group's conv features are gathered, the FC layers run on all K·b rows, the
        feature gradients are reduce-scattered: transfer, compute, transfer, one after another;
    (b) K passes; in pass k worker k sends its b rows to each of the K − 1 others, one message
        after another on its own link ((K − 1)·(α + n_pass·β) each way, n_pass = b rows);
    (c) K passes; each is an all-gather (and reduce-scatter back) of b/K rows from every worker.
  In (b) and (c) the transfer of pass k + 1 overlaps the FC compute of pass k (and the gradient
  of pass k − 1 travels back meanwhile), so the stage takes x + f + (K − 1)·max(f, x + y) + y
  for a pass's forward transfer x, FC compute f and backward transfer y. With
  `fc_updates_per_step` = K the FC gradients are also all-reduced over "data" after every pass.
  Beyond the model: how well small GEMMs use a GPU, and any per-pass fixed costs.

  Returns:
    compute_s, communication_s (exposed), and step_s, the seconds of one step.
  """
  k = plan.model
  data_group_batch = global_batch // plan.data
  per_layer = layers(arch, image_size, num_classes)
  conv_layers = [layer for layer in per_layer if layer.kind == "conv"]
  fc_layers = [layer for layer in per_layer if layer.kind == "fc"]
  conv_compute = sum(6.0 * layer.macs * global_batch / plan.batch_divisor
                     for layer in conv_layers) / flops_per_second
  fc_compute = sum(6.0 * layer.macs * data_group_batch / k
                   for layer in fc_layers) / flops_per_second
  conv_bytes = sum(layer.params for layer in conv_layers) * bytes_per_value
  fc_bytes = sum(layer.params for layer in fc_layers) / k * bytes_per_value
  gradients = (allreduce_time(algorithm, conv_bytes, plan.data * k, link=link) +
               fc_updates_per_step * allreduce_time(algorithm, fc_bytes, plan.data, link=link))
  features = data_group_batch * fc_layers[0].input_values * bytes_per_value  # the gathered n
  # Inside the FC stage (every variant): fc7's input gathered and the logits all-reduced.
  inner = sum(gather_scatter_time(data_group_batch * layer.input_values * bytes_per_value, k,
                                  link) for layer in fc_layers[1:-1])
  inner += allreduce_time(algorithm, data_group_batch * num_classes * bytes_per_value, k,
                          link=link)
  if variant == "a" or k == 1:
    exchange = gather_scatter_time(features, k, link)
    fc_stage = exchange + fc_compute + inner
    exposed = exchange + inner
  else:
    n_pass = features / k
    if variant == "b":
      x = y = (k - 1) * (link.alpha + n_pass * link.beta)
    else:
      x = y = gather_scatter_time(n_pass, k, link) / 2
    f = (fc_compute + inner) / k
    fc_stage = x + f + (k - 1) * max(f, x + y) + y
    exposed = fc_stage - fc_compute
  step = conv_compute + fc_stage + gradients
  return {"compute_s": conv_compute + fc_compute, "communication_s": exposed + gradients,
          "step_s": step}
