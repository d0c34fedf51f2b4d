"""The Krizhevsky convnets, written per device for any model-axis size.

One module, `AlexNet`, builds every variant from an `Architecture` (widths, kernels, columns) and a
`Layout` (how the current scheme splits it). With the default `Layout()` it is the plain
single-device network; that instance creates the parameters at full size for every scheme.

Registry (`ARCHITECTURES`):
  alexnet           Krizhevsky, Sutskever & Hinton 2012: two columns, LRN, 60,965,224 parameters
                    at 1000 classes and 224² input.
  alexnet_owt       Krizhevsky 2014 ("one weird trick"): one column, 64-192-384-256-256, no LRN,
                    61,100,840 parameters at 1000 classes.
  alexnet_bn        AlexNet-BN, the model of the LARS paper (You et al. 2017): the 2012 widths in
                    one column, batch norm after every conv (before the ReLU) instead of LRN, conv
                    biases dropped (the norm's shift replaces them).
  alexnet_tiny, alexnet_owt_tiny, alexnet_bn_tiny
                    the same structures with narrow widths, for tests.
"""

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import linen as nn

from hybrid_parallel import checks, layers
from hybrid_parallel.errors import UserError


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


def check_layout(name: str, arch: Architecture, layout: Layout, *, image_size: int) -> None:
  """Raises one clear UserError if `layout` cannot split `arch` or the image is too small."""
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
          grouped_conv: str = "feature_group_count") -> AlexNet:
  """Looks up `name` in the registry, checks `layout` against it, returns the module."""
  checks.one_of(ARCHITECTURES)("model", name)
  check_dtype("dtype", dtype)
  # The per-platform settings ("auto" is resolved before this: experiment.for_platform).
  checks.one_of(layers.MAX_POOLS)("max_pool", max_pool)
  checks.one_of(layers.STEM_CONVS)("stem_conv", stem_conv)
  checks.one_of(layers.GROUPED_CONVS)("grouped_conv", grouped_conv)
  arch = ARCHITECTURES[name]
  check_layout(name, arch, layout, image_size=image_size or arch.image_size)
  return AlexNet(arch, num_classes, layout, dropout_rate, sync_batch_norm, DTYPES[dtype],
                 max_pool, stem_conv, grouped_conv)


def input_shape(name: str, image_size: int | None, channels: int, *, batch: int = 1):
  """Shape of a batch of `batch` images for model `name` (NHWC)."""
  size = image_size or ARCHITECTURES[name].image_size
  return (batch, size, size, channels)


def count_params(params) -> int:
  """Number of scalars in a parameter tree (works on ShapeDtypeStructs too)."""
  return sum(math.prod(p.shape) for p in jax.tree.leaves(params))
