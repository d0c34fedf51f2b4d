"""The Krizhevsky convnets and the residual networks, written per device for any model-axis size.

Two modules: `AlexNet` builds every Krizhevsky variant from an `Architecture` (widths, kernels,
columns), `ResNet` every residual network from a `ResNetArchitecture` (stem, stages, block kind);
both take a `Layout` (how the current scheme splits them). With the default `Layout()` each is the
plain single-device network; that instance creates the parameters at full size for every scheme.

Registry (`ARCHITECTURES`), the Krizhevsky nets:
  alexnet           Krizhevsky, Sutskever & Hinton 2012: two columns, LRN, 60,965,224 parameters
                    at 1000 classes and 224² input.
  alexnet_owt       Krizhevsky 2014 ("one weird trick"): one column, 64-192-384-256-256, no LRN,
                    61,100,840 parameters at 1000 classes.
  alexnet_bn        AlexNet-BN, the model of the LARS paper (You et al. 2017): the 2012 widths in
                    one column, batch norm after every conv (before the ReLU) instead of LRN, conv
                    biases dropped (the norm's shift replaces them).
  alexnet_tiny, alexnet_owt_tiny, alexnet_bn_tiny
                    the same structures with narrow widths, for tests.

The residual networks (every one with batch norm, no dropout: `dropout_rate` does not apply):
  resnet50          torchvision's resnet50 (He et al. 2016, "v1.5": the stride of a downsampling
                    block on its 3×3 conv): 7×7/2 stem, 3×3/2 max-pool, 3-4-6-3 bottleneck blocks
                    of 256-512-1024-2048 channels, 25,557,032 parameters at 1000 classes.
  resnet50_cifar    the network MXNet's example/image-classification runs as
                    `train_cifar10.py --network resnet --num-layers 50` (symbols/resnet.py): at
                    its 28² crops the 6n + 2 CIFAR family of He et al. with n = 8 — a 3×3 stem of
                    16, three stages of eight basic pre-activation blocks (He et al. 2016b) of
                    16-32-64 channels, an input batch norm without scale; 50 weight layers,
                    758,621 parameters at 10 classes.
  resnet_tiny       resnet50's blocks (stem and pool, bottlenecks with the stride on the 3×3,
                    projection shortcuts), one block per stage, widths ÷8: for tests and the CPU.
  resnet_cifar_tiny resnet50_cifar's blocks, one per stage (the n = 1 member, 8 weight layers),
                    widths ÷2.
"""

import dataclasses
import math
from collections.abc import Iterator

import jax
import jax.numpy as jnp
from flax import linen as nn

from hybrid_parallel import checks, layers
from hybrid_parallel.errors import UserError
from hybrid_parallel.mesh import MODEL


@dataclasses.dataclass(frozen=True)
class ConvLayer:
  """One conv stage: conv → ReLU → [LRN] → [max-pool 3/2]."""
  name: str
  features: int
  kernel: int
  stride: int
  padding: int
  within_column: bool  # True: connected only to the previous layer's channels in its own column.
  lrn: bool = False
  pool: bool = False


@dataclasses.dataclass(frozen=True)
class Architecture:
  """A Krizhevsky-style convnet: conv stages, then hidden FC layers, then the classifier."""
  convs: tuple[ConvLayer, ...]
  hidden: tuple[int, ...]  # widths of the hidden FC layers (fc6, fc7); dropout precedes each.
  columns: int  # 2 for the 2012 two-GPU net, 1 for the one-column net.
  image_size: int  # the input size the network was published with.
  batch_norm: bool = False  # batch norm after every conv, before the ReLU (AlexNet-BN).

  def fc_names(self) -> tuple[str, ...]:
    first = len(self.convs) + 1
    return tuple(f"fc{first + i}" for i in range(len(self.hidden) + 1))

  def feature_map_size(self, image_size: int) -> int:
    """Side of the last conv stage's output for a square input of `image_size`."""
    side = image_size
    for c in self.convs:
      side = (side + 2 * c.padding - c.kernel) // c.stride + 1
      if c.pool:
        side = (side - 3) // 2 + 1
      if side < 1:
        break
    return side


def _krizhevsky(widths, hidden, columns, lrn, image_size, batch_norm=False) -> Architecture:
  c1, c2, c3, c4, c5 = widths
  within = columns > 1  # conv2, conv4, conv5 stay inside their column in the two-column net.
  return Architecture(
      convs=(ConvLayer("conv1", c1, 11, 4, 2, within_column=False, lrn=lrn, pool=True),
             ConvLayer("conv2", c2, 5, 1, 2, within_column=within, lrn=lrn, pool=True),
             ConvLayer("conv3", c3, 3, 1, 1, within_column=False),
             ConvLayer("conv4", c4, 3, 1, 1, within_column=within),
             ConvLayer("conv5", c5, 3, 1, 1, within_column=within, pool=True)),
      hidden=hidden, columns=columns, image_size=image_size, batch_norm=batch_norm)


ARCHITECTURES = {
    "alexnet": _krizhevsky((96, 256, 384, 384, 256), (4096, 4096), 2, True, 224),
    "alexnet_owt": _krizhevsky((64, 192, 384, 256, 256), (4096, 4096), 1, False, 224),
    "alexnet_bn": _krizhevsky((96, 256, 384, 384, 256), (4096, 4096), 1, False, 224, True),
    # Same structure, widths ÷8 (÷64 for FC); 64² is the smallest input the 11/4 stem and three
    # 3/2 pools leave a feature map for.
    "alexnet_tiny": _krizhevsky((16, 32, 48, 48, 32), (64, 64), 2, True, 64),
    "alexnet_owt_tiny": _krizhevsky((8, 24, 48, 32, 32), (64, 64), 1, False, 64),
    "alexnet_bn_tiny": _krizhevsky((16, 32, 48, 48, 32), (64, 64), 1, False, 64, True),
}


@dataclasses.dataclass(frozen=True)
class ResNetConv:
  """One convolution of a residual network, where it sits (`ResNetArchitecture.conv_layers`)."""
  name: str  # its block's name, then its own: "conv2_1/conv2", "conv2_1/shortcut"; or "conv1".
  in_channels: int
  features: int
  kernel: int
  stride: int
  in_side: int  # the side of its (square) input.

  @property
  def out_side(self) -> int:
    return (self.in_side + 2 * (self.kernel // 2) - self.kernel) // self.stride + 1


@dataclasses.dataclass(frozen=True)
class ResNetArchitecture:
  """A residual network: a stem, stages of residual blocks, global average pooling, a classifier.

  Attributes:
    stem: "imagenet" — a 7×7 / 2 conv, batch norm, ReLU and a 3×3 / 2 max-pool with padding 1
      (torchvision); "cifar" — one 3×3 / 1 conv (MXNet's example at 28² and below).
    stem_width: the stem conv's filters.
    blocks: residual blocks per stage; each stage after the first halves the side in its first
      block (stride 2 on the block's first 3×3 conv).
    widths: each stage's output channels.
    bottleneck: 1×1 → 3×3 → 1×1 blocks whose inner width is a quarter of their output; else two
      3×3 convs.
    preactivation: batch norm → ReLU → conv in every block, the shortcut taken after the first
      ReLU (He et al. 2016b, MXNet's symbols/resnet.py), an input batch norm without scale before
      the stem and batch norm → ReLU after the last block; else conv → batch norm (→ ReLU) with a
      ReLU after the sum (He et al. 2016, torchvision).
    project_every_stage: the first block of every stage has a 1×1 conv shortcut, even where its
      channels and side stay (MXNet's `dim_match=False`); else only where they change
      (torchvision).
    epsilon: batch norm's ε (torchvision 1e-5, MXNet's example 2e-5).
    conv_init: He et al.'s normal initialisation of the conv kernels over "fan_out" (torchvision's
      kaiming_normal_) or "fan_in" (MXNet's example: Xavier, gaussian, "in", magnitude 2).
    image_size: the input size the network was published with.
  """
  stem: str
  stem_width: int
  blocks: tuple[int, ...]
  widths: tuple[int, ...]
  bottleneck: bool
  preactivation: bool
  project_every_stage: bool
  epsilon: float
  conv_init: str
  image_size: int
  batch_norm = True  # every residual network here normalises every conv.
  columns = 1

  def fc_names(self) -> tuple[str, ...]:
    return ("fc",)  # the classifier, torchvision's name.

  def block_names(self) -> Iterator[tuple[str, int, int, int]]:
    """(name, input channels, output channels, stride) of every block: "conv2_1" … (He et al.'s
    stage names: conv2_x is the first stage after the stem conv1)."""
    channels = self.stem_width
    for stage, (blocks, width) in enumerate(zip(self.blocks, self.widths)):
      for block in range(blocks):
        stride = 2 if stage > 0 and block == 0 else 1
        yield f"conv{stage + 2}_{block + 1}", channels, width, stride
        channels = width

  def projects(self, in_channels: int, features: int, stride: int, first: bool) -> bool:
    """Whether a block (the first of its stage: `first`) has a 1×1 conv on its shortcut."""
    return stride != 1 or in_channels != features or (first and self.project_every_stage)

  def branch(self, features: int, stride: int) -> tuple[tuple[int, int, int], ...]:
    """(kernel, filters, stride) of a block's convs, in order."""
    if self.bottleneck:
      return ((1, features // 4, 1), (3, features // 4, stride), (1, features, 1))
    return ((3, features, stride), (3, features, 1))

  def conv_layers(self, image_size: int) -> list[ResNetConv]:
    """Every convolution with its input: what the network computes, for its arithmetic
    (analysis/costmodel.py) and its layout checks."""
    imagenet = self.stem == "imagenet"
    stem = ResNetConv("conv1", 3, self.stem_width, 7 if imagenet else 3, 2 if imagenet else 1,
                      image_size)
    convs, side = [stem], stem.out_side
    if imagenet:
      side = (side + 2 - 3) // 2 + 1  # the 3×3 / 2 max-pool, padding 1.
    for name, in_channels, features, stride in self.block_names():
      if self.projects(in_channels, features, stride, name.endswith("_1")):
        convs.append(ResNetConv(f"{name}/shortcut", in_channels, features, 1, stride, side))
      channels = in_channels
      for i, (kernel, filters, conv_stride) in enumerate(self.branch(features, stride), 1):
        convs.append(ResNetConv(f"{name}/conv{i}", channels, filters, kernel, conv_stride, side))
        channels, side = filters, convs[-1].out_side
    return convs


def _resnet(blocks, widths, *, stem_width, bottleneck, image_size,
            mxnet: bool = False) -> ResNetArchitecture:
  """torchvision's ResNet (`mxnet=False`) or MXNet's example's pre-activation CIFAR ResNet."""
  if mxnet:
    return ResNetArchitecture("cifar", stem_width, blocks, widths, bottleneck, preactivation=True,
                              project_every_stage=True, epsilon=2e-5, conv_init="fan_in",
                              image_size=image_size)
  return ResNetArchitecture("imagenet", stem_width, blocks, widths, bottleneck,
                            preactivation=False, project_every_stage=False, epsilon=1e-5,
                            conv_init="fan_out", image_size=image_size)


ARCHITECTURES.update({
    # torchvision.models.resnet50 (torchvision/models/resnet.py: Bottleneck, [3, 4, 6, 3]).
    "resnet50": _resnet((3, 4, 6, 3), (256, 512, 1024, 2048), stem_width=64, bottleneck=True,
                        image_size=224),
    # symbols/resnet.py's get_symbol(num_layers=50, image_shape="3,28,28"): height ≤ 28, and
    # (50 − 2) % 6 == 0 below 164 layers, so per_unit = 8, filter_list = [16, 16, 32, 64],
    # bottle_neck = False; train_cifar10.py crops 28² from its padded 32² images.
    "resnet50_cifar": _resnet((8, 8, 8), (16, 32, 64), stem_width=16, bottleneck=False,
                              image_size=28, mxnet=True),
    "resnet_tiny": _resnet((1, 1, 1, 1), (32, 64, 128, 256), stem_width=8, bottleneck=True,
                           image_size=64),
    "resnet_cifar_tiny": _resnet((1, 1, 1), (8, 16, 32), stem_width=8, bottleneck=False,
                                 image_size=32, mxnet=True),
})


@dataclasses.dataclass(frozen=True)
class Layout:
  """How a scheme splits the network over the "model" axis (see `partitioning.make_plan`).

  Attributes:
    conv_shards: ways each conv layer's filters are split (model/hybrid: the model-axis size).
    fc_shards: ways each FC layer's neurons are split.
    conv_batch_over_model: the conv stages split the *batch* over "model" too (one weird trick);
      their features are then gathered over "model" so that every model device sees the whole
      data-shard batch at the FC layers.
    conv_batch_axes: the mesh axes the conv stages' batch is split over (batch norm's statistics
      are averaged over them).
  """
  conv_shards: int = 1
  fc_shards: int = 1
  conv_batch_over_model: bool = False
  conv_batch_axes: tuple[str, ...] = ()


def check_layout(name: str, arch: Architecture | ResNetArchitecture, layout: Layout, *,
                 image_size: int) -> None:
  """Raises one clear UserError if `layout` cannot split `arch` or the image is too small."""
  if isinstance(arch, ResNetArchitecture):
    _check_resnet_layout(name, arch, layout, image_size=image_size)
    return
  if arch.feature_map_size(image_size) < 1:
    raise UserError(f"image_size {image_size} is too small for {name}: its conv stages shrink it "
                    f"to nothing; use at least 64.")
  m = layout.conv_shards
  for c in arch.convs:
    if c.features % m:
      raise UserError(f"{name} layer {c.name} has {c.features} filters, which a model axis of "
                      f"size {m} cannot split evenly.")
    if (c.within_column or c.lrn) and arch.columns % m:
      what = ("is connected only within its column" if c.within_column else
              "normalises (LRN) within each column")
      sizes = " or ".join(str(d) for d in range(1, arch.columns + 1) if arch.columns % d == 0)
      raise UserError(f"{name} layer {c.name} {what}, and {name} has {arch.columns} columns, so "
                      f"the model axis must have size {sizes}, not {m}.")
  for fc, width in zip(arch.fc_names(), arch.hidden):
    if width % layout.fc_shards:
      raise UserError(f"{name} layer {fc} has {width} neurons, which a model axis of size "
                      f"{layout.fc_shards} cannot split evenly.")


def _check_resnet_layout(name: str, arch: ResNetArchitecture, layout: Layout, *,
                         image_size: int) -> None:
  """A residual network splits every conv's filters (and its batch norm's channels) over
  "model", and the classifier's input channels over the FC shards."""
  for conv in arch.conv_layers(image_size):
    if conv.features % layout.conv_shards:
      raise UserError(f"{name} layer {conv.name} has {conv.features} filters, which a model axis "
                      f"of size {layout.conv_shards} cannot split evenly.")
  if arch.widths[-1] % layout.fc_shards:
    raise UserError(f"{name} layer fc takes {arch.widths[-1]} channels, which a model axis of "
                    f"size {layout.fc_shards} cannot split evenly.")


class AlexNet(nn.Module):
  """A Krizhevsky convnet as one device runs it under `layout`.

  Attributes:
    arch: the architecture.
    num_classes: classifier width.
    layout: how the scheme splits the layers; `Layout()` is the whole network on one device.
    dropout_rate: dropout before each hidden FC layer (0.5 in the papers).
    sync_batch_norm: batch norm with the statistics of the whole batch (over
      `layout.conv_batch_axes`) instead of each worker's own (the default, as Goyal et al.).
    dtype: the compute dtype of convolutions, matmuls and the activations between them (and so
      of the activation collectives); parameters, gradients, normalisation statistics and logits
      stay float32 (mixed precision), or float64 for a float64 reference (`DTYPES`).
    max_pool: how the max-pools are computed (`layers.MAX_POOLS`; the same numbers either way).
    stem_conv: how the strided stem conv is computed (`layers.STEM_CONVS`).
    grouped_conv: how a conv connected only within its column is computed on a device holding
      several columns (`layers.GROUPED_CONVS`).
  """
  arch: Architecture
  num_classes: int
  layout: Layout = Layout()
  dropout_rate: float = 0.5
  sync_batch_norm: bool = False
  dtype: jnp.dtype = jnp.float32
  max_pool: str = "argmax"
  stem_conv: str = "direct"
  grouped_conv: str = "feature_group_count"

  @nn.compact
  def __call__(self, inputs: jax.Array, *, example_ids_B: jax.Array,
               dropout_key: jax.Array | None = None, stage: str = "all") -> jax.Array:
    """Returns the logits of this device's examples (model-invariant), or one stage's output.

    Args:
      inputs: this device's images `[B, H, W, C]` — or, for `stage = "classifier"`, rows of
        flattened conv features `[B, F]` (as `stage = "features"` returns them).
      example_ids_B: the global batch position of each image (or feature row); it seeds the
        dropout masks.
      dropout_key: the step's dropout key; None evaluates (no dropout, batch norm with its
        running statistics).
      stage: "all" — the network; "features" — the conv stages only: this device's flattened
        features `[B, F]`, before any exchange of rows over "model"; "classifier" — the FC layers
        only, on the rows `inputs`. The stages let a step route feature rows between them (the
        variable-batch passes of steps/variable_batch.py).
    """
    m_conv, m_fc = self.layout.conv_shards, self.layout.fc_shards
    ids = example_ids_B
    x_BF = inputs
    if stage != "classifier":
      local_columns = max(1, self.arch.columns // m_conv)
      x_BHWC = inputs.astype(self.dtype)
      for i, c in enumerate(self.arch.convs):
        if i > 0 and not c.within_column and m_conv > 1:
          # This layer sees every channel of the previous one: exchange activations (Yadan et
          # al.).
          x_BHWC = layers.gather_over_model(x_BHWC, axis=-1)
        x_BHWC = layers.ShardedConv(c.features, c.kernel, c.stride, c.padding, shards=m_conv,
                                    groups=local_columns if c.within_column else 1,
                                    use_bias=not self.arch.batch_norm, dtype=self.dtype,
                                    implementation=self.stem_conv if i == 0 else "direct",
                                    grouped=self.grouped_conv, name=c.name)(x_BHWC)
        if self.arch.batch_norm:
          x_BHWC = layers.BatchNorm(self.layout.conv_batch_axes, self.sync_batch_norm,
                                    name=f"{c.name}_bn")(x_BHWC, train=dropout_key is not None)
        x_BHWC = nn.relu(x_BHWC)
        if c.lrn:
          x_BHWC = layers.local_response_norm(x_BHWC, local_columns)
        if c.pool:
          x_BHWC = layers.max_pool(x_BHWC, self.max_pool)
      if m_conv > 1:
        x_BHWC = layers.gather_over_model(x_BHWC, axis=-1)
      x_BF = x_BHWC.reshape(x_BHWC.shape[0], -1)
      if stage == "features":
        return x_BF
      if self.layout.conv_batch_over_model:
        # One weird trick: data parallel below, model parallel above; every model device now
        # takes the whole batch of its data shard (Krizhevsky 2014, scheme (a)).
        x_BF = layers.gather_over_model(x_BF, axis=0)
        ids = layers.replicate_over_model(ids, axis=0)

    *hidden_names, classifier_name = self.arch.fc_names()
    for layer_index, (name, width) in enumerate(zip(hidden_names, self.arch.hidden)):
      if layer_index > 0 and m_fc > 1:
        x_BF = layers.gather_over_model(x_BF, axis=-1)
      if dropout_key is not None:
        x_BF = layers.example_dropout(x_BF, self.dropout_rate,
                                      key=jax.random.fold_in(dropout_key, layer_index),
                                      example_ids_B=ids)
      x_BF = nn.relu(layers.ColumnDense(width, shards=m_fc, dtype=self.dtype, name=name)(x_BF))
    logits = layers.RowDense(self.num_classes, shards=m_fc, name=classifier_name)(x_BF)
    return logits.astype(layers.at_least_float32(self.dtype))


class ResidualBlock(nn.Module):
  """One residual block of `arch` as one device runs it under `layout` (ResNet's attributes).

  Under a model axis every conv holds its share of the filters, and each conv's input is
  gathered over "model" first (every conv sees all channels); the block's input and output stay
  split by channel, so an identity shortcut adds the device's own channels.
  """
  arch: ResNetArchitecture
  features: int
  stride: int
  project: bool
  layout: Layout
  sync_batch_norm: bool
  dtype: jnp.dtype

  def _conv(self, kernel: int, features: int, stride: int, name: str) -> layers.ShardedConv:
    return layers.ShardedConv(features, kernel, stride, kernel // 2,
                              shards=self.layout.conv_shards, use_bias=False, dtype=self.dtype,
                              kernel_init=_conv_init(self.arch), name=name)

  def _norm(self, name: str) -> layers.BatchNorm:
    return layers.BatchNorm(self.layout.conv_batch_axes, self.sync_batch_norm,
                            epsilon=self.arch.epsilon, name=name)

  def _gather(self, x_BHWC: jax.Array) -> jax.Array:
    return (layers.gather_over_model(x_BHWC, axis=-1) if self.layout.conv_shards > 1
            else x_BHWC)

  @nn.compact
  def __call__(self, x_BHWC: jax.Array, train: bool) -> jax.Array:
    convs = self.arch.branch(self.features, self.stride)
    shortcut_conv = lambda y: self._conv(1, self.features, self.stride, "shortcut")(y)
    if self.arch.preactivation:  # MXNet's residual_unit: BN → ReLU → conv, summed as they are.
      y = self._gather(nn.relu(self._norm("bn1")(x_BHWC, train)))
      shortcut = shortcut_conv(y) if self.project else x_BHWC
      for i, (kernel, features, stride) in enumerate(convs, 1):
        if i > 1:
          y = self._gather(nn.relu(self._norm(f"bn{i}")(y, train)))
        y = self._conv(kernel, features, stride, f"conv{i}")(y)
      return y + shortcut
    # torchvision's Bottleneck / BasicBlock: conv → BN → ReLU, no ReLU before the sum.
    whole = self._gather(x_BHWC)
    shortcut = (self._norm("shortcut_bn")(shortcut_conv(whole), train) if self.project
                else x_BHWC)
    y = whole
    for i, (kernel, features, stride) in enumerate(convs, 1):
      if i > 1:
        y = self._gather(nn.relu(y))
      y = self._norm(f"bn{i}")(self._conv(kernel, features, stride, f"conv{i}")(y), train)
    return nn.relu(y + shortcut)


def _conv_init(arch: ResNetArchitecture):
  """He et al.'s normal initialisation: std √(2 / fan), over the fan `arch.conv_init` names."""
  return nn.initializers.variance_scaling(2.0, arch.conv_init, "normal")


class ResNet(nn.Module):
  """A residual network as one device runs it under `layout` (the interface of `AlexNet`).

  Under a model axis (model, hybrid) every conv's filters and their batch norms' channels are
  split, each conv's input gathered over "model" as AlexNet's are; the pooled features stay split
  by channel and the classifier takes its rows of them (`layers.RowDense`). Under owt the convs
  split the batch over "model" too, and the pooled features are gathered as AlexNet's are before
  the FC layers, each model device taking its channels' rows of the classifier.

  Attributes:
    arch: the architecture.
    num_classes: classifier width.
    layout: how the scheme splits the layers; `Layout()` is the whole network on one device.
    sync_batch_norm, dtype, max_pool, stem_conv: as `AlexNet`'s (`stem_conv` for the strided
      stem; the max-pool of an "imagenet" stem).
  """
  arch: ResNetArchitecture
  num_classes: int
  layout: Layout = Layout()
  sync_batch_norm: bool = False
  dtype: jnp.dtype = jnp.float32
  max_pool: str = "argmax"
  stem_conv: str = "direct"

  def _norm(self, name: str, **options) -> layers.BatchNorm:
    return layers.BatchNorm(self.layout.conv_batch_axes, self.sync_batch_norm,
                            epsilon=self.arch.epsilon, name=name, **options)

  @nn.compact
  def __call__(self, inputs: jax.Array, *, example_ids_B: jax.Array,
               dropout_key: jax.Array | None = None, stage: str = "all") -> jax.Array:
    """Returns the logits of this device's examples (model-invariant), or one stage's output.

    Args:
      inputs, example_ids_B, stage: as `AlexNet`'s; "features" are the pooled channels `[B, C]`,
        whole on every model device.
      dropout_key: None evaluates (batch norm with its running statistics); otherwise the network
        trains (it has no dropout).
    """
    del example_ids_B  # no dropout: nothing depends on an example's position.
    arch, layout, train = self.arch, self.layout, dropout_key is not None
    m = layout.conv_shards
    x_BF = inputs
    if stage != "classifier":
      x_BHWC = inputs.astype(self.dtype)
      if arch.preactivation:
        # MXNet's bn_data (fix_gamma): the image's channels, whole on every model device.
        x_BHWC = self._norm("input_bn", use_scale=False)(x_BHWC, train)
      imagenet = arch.stem == "imagenet"
      x_BHWC = layers.ShardedConv(arch.stem_width, 7 if imagenet else 3, 2 if imagenet else 1,
                                  3 if imagenet else 1, shards=m, use_bias=False,
                                  dtype=self.dtype, implementation=self.stem_conv,
                                  kernel_init=_conv_init(arch), name="conv1")(x_BHWC)
      if imagenet:
        x_BHWC = nn.relu(self._norm("conv1_bn")(x_BHWC, train))
        x_BHWC = layers.max_pool(x_BHWC, self.max_pool, padding=1)
      for name, in_channels, features, stride in arch.block_names():
        project = arch.projects(in_channels, features, stride, name.endswith("_1"))
        x_BHWC = ResidualBlock(arch, features, stride, project, layout, self.sync_batch_norm,
                               self.dtype, name=name)(x_BHWC, train)
      if arch.preactivation:
        x_BHWC = nn.relu(self._norm("final_bn")(x_BHWC, train))
      # Global average pooling, summed in at least float32.
      x_BF = jnp.mean(x_BHWC.astype(layers.at_least_float32(self.dtype)), axis=(1, 2))
      x_BF = x_BF.astype(self.dtype)
      if stage == "features":
        return layers.gather_over_model(x_BF, axis=-1) if m > 1 else x_BF
      if layout.conv_batch_over_model:
        x_BF = layers.gather_over_model(x_BF, axis=0)  # owt: the data shard's batch, as AlexNet.
    if m == 1 and layout.fc_shards > 1:
      # The whole channels are here; the classifier's rows are split: take this device's.
      width = x_BF.shape[-1] // layout.fc_shards
      x_BF = jax.lax.dynamic_slice_in_dim(x_BF, jax.lax.axis_index(MODEL) * width, width, axis=-1)
    logits = layers.RowDense(self.num_classes, shards=layout.fc_shards, name="fc")(x_BF)
    return logits.astype(layers.at_least_float32(self.dtype))


# Either network: what `build` returns and every step takes.
Network = AlexNet | ResNet


# config.dtype → the compute dtype. Parameters and optimiser state are float32 under float32 and
# bfloat16 (mixed precision). float64 is the exact reference the tests measure float32 rounding
# against: the same network, initial values and dropout masks, every value in float64 (it needs
# jax.enable_x64).
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float64": jnp.float64}


def check_dtype(name: str, dtype: str) -> None:
  """One UserError for a compute dtype (the setting `name`) that cannot run here."""
  checks.one_of(DTYPES)(name, dtype)
  if dtype == "float64" and not jax.config.jax_enable_x64:
    raise UserError("dtype 'float64' needs 64-bit JAX (JAX_ENABLE_X64=1, or inside "
                    "jax.enable_x64(True)); train with float32 or bfloat16.")


def build(name: str, num_classes: int, layout: Layout = Layout(), *,
          image_size: int | None = None, dropout_rate: float = 0.5,
          sync_batch_norm: bool = False, dtype: str = "float32",
          max_pool: str = "argmax", stem_conv: str = "direct",
          grouped_conv: str = "feature_group_count") -> Network:
  """Looks up `name` in the registry, checks `layout` against it, returns the module (a ResNet
  takes no `dropout_rate` and no `grouped_conv`: it has neither dropout nor grouped convs)."""
  checks.one_of(ARCHITECTURES)("model", name)
  check_dtype("dtype", dtype)
  # The per-platform settings ("auto" is resolved before this: experiment.for_platform).
  checks.one_of(layers.MAX_POOLS)("max_pool", max_pool)
  checks.one_of(layers.STEM_CONVS)("stem_conv", stem_conv)
  checks.one_of(layers.GROUPED_CONVS)("grouped_conv", grouped_conv)
  arch = ARCHITECTURES[name]
  check_layout(name, arch, layout, image_size=image_size or arch.image_size)
  if isinstance(arch, ResNetArchitecture):
    return ResNet(arch, num_classes, layout, sync_batch_norm, DTYPES[dtype], max_pool, stem_conv)
  return AlexNet(arch, num_classes, layout, dropout_rate, sync_batch_norm, DTYPES[dtype],
                 max_pool, stem_conv, grouped_conv)


def input_shape(name: str, image_size: int | None, channels: int, *, batch: int = 1):
  """Shape of a batch of `batch` images for model `name` (NHWC)."""
  size = image_size or ARCHITECTURES[name].image_size
  return (batch, size, size, channels)


def count_params(params) -> int:
  """Number of scalars in a parameter tree (works on ShapeDtypeStructs too)."""
  return sum(math.prod(p.shape) for p in jax.tree.leaves(params))
