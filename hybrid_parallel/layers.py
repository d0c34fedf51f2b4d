"""Model-parallel building blocks, written per device.

Every layer here sees *local* shapes: a layer whose filters are split `shards` ways over the "model"
axis holds `features // shards` of them. With `shards == 1` no collective is issued, so the same
code builds the full-size single-device model (used to create parameters and as the reference).

The collectives follow the typing rules of `jax.shard_map` (check_vma=True). An activation
gathered over "model" stays typed *device-varying* (`gather_over_model`): every consumer of it is a
layer whose parameters are split over "model", so each device's cotangent for it is a partial
sum, and autodiff's transpose of the gather — a reduce-scatter — adds the partials and hands each
device its slice: the minimum backward traffic. Values that every model device uses alike and that
need no gradient (labels, weights, example ids) are gathered as *invariant*
(`replicate_over_model`).
"""

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import linen as nn

from hybrid_parallel.mesh import MODEL

# Parameters and batch-norm statistics are created in float32 whatever the compute dtype and
# whatever jax.enable_x64 says, so that every run starts from the same values (a float64
# reference casts them afterwards: train_state.create_unsharded).
PARAM_DTYPE = jnp.float32


def at_least_float32(dtype) -> jnp.dtype:
  """The dtype of normalisation arithmetic and of the state: float32 for float32 and bfloat16
  compute, float64 for a float64 reference."""
  return jnp.promote_types(dtype, jnp.float32)


def gather_over_model(x: jax.Array, axis: int) -> jax.Array:
  """Concatenates the model devices' slices of `x` along `axis` for layers split over "model".

  Forward: an all-gather; backward: a reduce-scatter of the consumers' partial cotangents. Only
  feed the result to computations whose parameters are split over "model" (see module docstring).
  """
  return jax.lax.all_gather(x, MODEL, axis=axis, tiled=True)


def replicate_over_model(x: jax.Array, axis: int) -> jax.Array:
  """Concatenates the model devices' slices of `x`; the result is typed model-invariant."""
  return jax.lax.all_gather(x, MODEL, axis=axis, tiled=True, to="invarying")


def local_response_norm(x_BHWC: jax.Array, columns: int, *, size: int = 5, k: float = 2.0,
                        alpha: float = 1e-4, beta: float = 0.75) -> jax.Array:
  """Krizhevsky et al. 2012 local response normalisation across channels, within each column.

  b_c = a_c / (k + alpha * sum_{c' in window(c)} a_c'^2) ** beta, the window being `size`
  neighbouring channels of the same column (zero beyond the column's edges), as in the paper.

  Args:
    x_BHWC: activations whose channel axis holds `columns` equal, contiguous column blocks.
    columns: how many columns the channel axis holds on this device.
    size, k, alpha, beta: the paper's constants (n=5, k=2, α=1e-4, β=0.75).
  """
  b, h, w, c = x_BHWC.shape
  x_BHWGC = x_BHWC.reshape(b, h, w, columns, c // columns)
  x_BHWGC = x_BHWGC.astype(at_least_float32(x_BHWC.dtype))
  sq = jnp.square(x_BHWGC)
  half = size // 2
  padded = jnp.pad(sq, [(0, 0)] * 4 + [(half, size - 1 - half)])
  window_sum = sum(padded[..., i:i + c // columns] for i in range(size))
  denominator = k + alpha * window_sum
  if beta == 0.75:
    # d^-0.75 = d^-0.5 · (d^-0.5)^0.5: square roots instead of a general power (exp and log),
    # forward and backward. On XLA:CPU the LRN's fused backward pass was the step's largest
    # kernel; this makes it ~5× faster (docs/performance.md).
    inverse_root = jax.lax.rsqrt(denominator)
    scale = inverse_root * jnp.sqrt(inverse_root)
  else:
    scale = denominator ** -beta
  return (x_BHWGC * scale).reshape(b, h, w, c).astype(x_BHWC.dtype)


def _pool_windows(x_BHWC: jax.Array, out_h: int, out_w: int) -> list[jax.Array]:
  """The nine strided views x[2i + a, 2j + b] (a, b < 3) of 3×3, stride-2 windows."""
  return [x_BHWC[:, a:a + 2 * out_h - 1:2, b:b + 2 * out_w - 1:2, :]
          for a in range(3) for b in range(3)]


def _pool_with_argmax(x_BHWC: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The windows' maxima and, for each, which of its nine entries (3a + b) is the first maximum."""
  _, h, w, _ = x_BHWC.shape
  windows = _pool_windows(x_BHWC, (h - 3) // 2 + 1, (w - 3) // 2 + 1)
  best, index = windows[0], jnp.zeros(windows[0].shape, jnp.int8)
  for i, v in enumerate(windows[1:], start=1):
    better = v > best
    best, index = jnp.where(better, v, best), jnp.where(better, jnp.int8(i), index)
  return best, index


@jax.custom_vjp
def overlapping_max_pool(x_BHWC: jax.Array) -> jax.Array:
  """Krizhevsky et al.'s overlapping max-pooling: 3×3 windows, stride 2, no padding.

  The same values and gradient as `nn.max_pool(x, (3, 3), strides=(2, 2))` (each window's
  gradient goes to its first maximum in row-major order), with the gradient written for the CPU:
  XLA:CPU turns reduce_window's gradient into an arg-max reduce-window and a scatter that run on
  one core, many times slower than the elementwise form here (benchmarks/speed/layer_choices.py;
  figures in docs/performance.md). The forward pass records each window's arg-max as an int8, so the
  backward pass needs neither the input nor any comparison of recomputed floats.
  """
  return _pool_with_argmax(x_BHWC)[0]


def _max_pool_forward(x_BHWC):
  y, argmax = _pool_with_argmax(x_BHWC)
  return y, (argmax, x_BHWC.shape)


def _max_pool_backward(residuals, g_BhwC):
  """Input gradient, one parity class of input rows × columns at a time.

  An even input row 2k is row 0 of window k and row 2 of window k-1; an odd row 2k+1 is row 1 of
  window k; likewise for columns. So each of the four (row, column) parity classes of the input
  takes its gradient from at most 2×2 shifted copies of the output gradient, each where that
  window's arg-max is the entry in question — elementwise work that XLA fuses — and the four
  classes are interleaved back.
  """
  argmax, (_, h, w, _) = residuals
  out_h, out_w = g_BhwC.shape[1:3]
  border = ((0, 0), (1, 1), (1, 1), (0, 0))  # windows -1 and out_h / out_w: never chosen.
  argmax_padded = jnp.pad(argmax, border, constant_values=-1)
  g_padded = jnp.pad(g_BhwC, border)

  def covering(parity):
    # (start in the padded output, row or column inside that window) of the windows covering an
    # input line of this parity: window k-1 (padded k) at 2 and window k (padded k+1) at 0 for an
    # even line; window k at 1 for an odd one.
    return ((0, 2), (1, 0)) if parity == 0 else ((1, 1),)

  classes = {}
  for row_parity in (0, 1):
    for col_parity in (0, 1):
      rows, cols = (h - row_parity + 1) // 2, (w - col_parity + 1) // 2  # lines of this class
      used_rows, used_cols = min(rows, out_h + 1), min(cols, out_w + 1)  # lines in a window
      grad = jnp.zeros((g_BhwC.shape[0], used_rows, used_cols, g_BhwC.shape[3]), g_BhwC.dtype)
      for row_start, a in covering(row_parity):
        for col_start, b in covering(col_parity):
          window = (slice(None), slice(row_start, row_start + used_rows),
                    slice(col_start, col_start + used_cols))
          grad = grad + jnp.where(argmax_padded[window] == 3 * a + b, g_padded[window], 0)
      classes[row_parity, col_parity] = jnp.pad(
          grad, ((0, 0), (0, rows - used_rows), (0, cols - used_cols), (0, 0)))

  def interleave(even, odd, axis, size):
    odd = jnp.pad(odd, [(0, even.shape[axis] - odd.shape[axis]) if a == axis else (0, 0)
                        for a in range(4)])
    both = jnp.stack([even, odd], axis=axis + 1)
    shape = list(even.shape)
    shape[axis] *= 2
    return jax.lax.slice_in_dim(both.reshape(shape), 0, size, axis=axis)

  even_rows = interleave(classes[0, 0], classes[0, 1], 2, w)
  odd_rows = interleave(classes[1, 0], classes[1, 1], 2, w)
  return (interleave(even_rows, odd_rows, 1, h),)


overlapping_max_pool.defvjp(_max_pool_forward, _max_pool_backward)

# How the 3×3 / 2 max-pool is computed: "argmax" (`overlapping_max_pool`, the elementwise gradient
# written for XLA:CPU) or "reduce_window" (flax's `nn.max_pool`, XLA's own gradient). Both give
# the same values and gradients bit for bit (tests/models_test.py).
MAX_POOLS = ("argmax", "reduce_window")
# What "auto" picks on each platform: what was measured fastest there (docs/performance.md; on
# an H200, docs/gpu.md: reduce_window 0.78–0.85× argmax's images/s). TPU: *estimated*, never
# measured — XLA's optimal_seconds for the bfloat16 single step compiled for TPU v2 (docs/tpu.md):
# reduce_window 49.6 ms against argmax's 58.0.
MAX_POOL_BY_PLATFORM = {"cpu": "argmax", "gpu": "argmax", "tpu": "reduce_window"}


def max_pool(x_BHWC: jax.Array, implementation: str = "argmax", *,
             padding: int = 0) -> jax.Array:
  """Krizhevsky et al.'s overlapping 3×3 / 2 max-pool, computed as `implementation` says.

  `padding` rows and columns of −∞ on every side first (the ResNets' stem pool takes 1): no window
  takes its maximum there, and the padding's gradient is cut off again.
  """
  if padding:
    x_BHWC = jnp.pad(x_BHWC, ((0, 0), (padding, padding), (padding, padding), (0, 0)),
                     constant_values=-jnp.inf)
  if implementation == "reduce_window":
    return nn.max_pool(x_BHWC, (3, 3), strides=(2, 2))
  return overlapping_max_pool(x_BHWC)


def space_to_depth_conv(x_BHWC: jax.Array, kernel_KKCF: jax.Array, *, stride: int,
                        padding: int) -> jax.Array:
  """A stride-`stride` conv computed as a stride-1 conv over stride×stride blocks of pixels.

  The 11×11 / 4 stem sees 3 input channels: cuDNN pads them to 8 and runs it as a narrow
  implicit GEMM, the slowest conv of the step on a GPU. Regrouping every 4×4 block of pixels into
  one pixel of 48 channels (and the kernel, zero-padded to 12×12, likewise) gives a 3×3 / 1 conv
  over 48 channels — the same sums of the same products, in another order (the MLPerf TPU
  ResNets treat their 7×7 / 2 stem the same way). The kernel keeps its 11×11 layout, so
  parameters, checkpoints and gradients are those of the direct conv. Square images (as every
  model here takes).
  """
  k, s = kernel_KKCF.shape[0], stride
  blocks = -(-k // s)  # kernel blocks per side: ceil(11 / 4) = 3.
  out = (x_BHWC.shape[1] + 2 * padding - k) // s + 1
  extent = s * (out + blocks - 1)  # input rows the blocked conv reads.
  high = extent - x_BHWC.shape[1] - padding  # negative crops rows the direct conv never reads.
  zero = jnp.zeros((), x_BHWC.dtype)
  x = jax.lax.pad(x_BHWC, zero, [(0, 0, 0), (padding, high, 0), (padding, high, 0), (0, 0, 0)])
  b, n, c = x.shape[0], extent // s, x.shape[-1]
  x = x.reshape(b, n, s, n, s, c).transpose(0, 1, 3, 2, 4, 5).reshape(b, n, n, s * s * c)
  f = kernel_KKCF.shape[-1]
  w = jnp.pad(kernel_KKCF, [(0, blocks * s - k), (0, blocks * s - k), (0, 0), (0, 0)])
  w = w.reshape(blocks, s, blocks, s, c, f).transpose(0, 2, 1, 3, 4, 5).reshape(
      blocks, blocks, s * s * c, f)
  return jax.lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))


# How the strided stem conv is computed: "direct" (one strided conv) or "space_to_depth"
# (`space_to_depth_conv`). Equal up to float rounding (tests/models_test.py).
STEM_CONVS = ("direct", "space_to_depth")
# What "auto" picks on each platform: what was measured fastest there (docs/gpu.md on an H200;
# docs/performance.md on the CPU). TPU: estimated, never measured (docs/tpu.md: direct 58.0 ms,
# space_to_depth 60.1, XLA's optimal_seconds on TPU v2).
STEM_CONV_BY_PLATFORM = {"cpu": "direct", "gpu": "space_to_depth", "tpu": "direct"}


def per_group_conv(x_BHWC: jax.Array, kernel_KKCF: jax.Array, *, stride: int, padding: int,
                   groups: int) -> jax.Array:
  """A grouped conv (`feature_group_count = groups`) computed as one conv per group, their
  outputs concatenated: the same sums over the same channels.

  XLA:CPU computes a grouped conv's gradient slowly: forward + backward of the two-column
  AlexNet's conv2/4/5 with both columns on one device took 5.7–6.4× as long as this
  (docs/performance.md). Each group's conv here is the conv a model device runs when the columns
  are split over "model".
  """
  pairs = zip(jnp.split(x_BHWC, groups, axis=-1), jnp.split(kernel_KKCF, groups, axis=-1))
  return jnp.concatenate([jax.lax.conv_general_dilated(
      x, w, (stride, stride), [(padding, padding)] * 2,
      dimension_numbers=("NHWC", "HWIO", "NHWC")) for x, w in pairs], axis=-1)


# How a conv connected only within its column ("groups" > 1: conv2, conv4 and conv5 of the
# two-column net on a device holding both columns) is computed: "feature_group_count" (one XLA
# grouped convolution) or "per_group" (`per_group_conv`). Equal up to float rounding
# (tests/models_test.py).
GROUPED_CONVS = ("feature_group_count", "per_group")
# What "auto" picks on each platform: what was measured fastest there (docs/performance.md on the
# CPU). GPUs have grouped-conv kernels of their own and have not been measured; they keep XLA's
# grouped convolution. TPU: estimated, never measured (docs/tpu.md: feature_group_count 87.9 ms,
# per_group 91.4, XLA's optimal_seconds on TPU v2).
GROUPED_CONV_BY_PLATFORM = {"cpu": "per_group", "gpu": "feature_group_count",
                            "tpu": "feature_group_count"}


class _ConvParameters(nn.Module):
  """nn.Conv's parameters (names, shapes, initialisers, so the same values from the same key)
  applied by `conv(inputs, kernel)`: a conv computed in another way than nn.Conv's one op."""
  features: int
  kernel: int
  groups: int
  use_bias: bool
  dtype: jnp.dtype
  conv: Callable[[jax.Array, jax.Array], jax.Array]
  kernel_init: Callable

  @nn.compact
  def __call__(self, x_BHWC: jax.Array) -> jax.Array:
    kernel = self.param("kernel", self.kernel_init,
                        (self.kernel, self.kernel, x_BHWC.shape[-1] // self.groups,
                         self.features), PARAM_DTYPE)
    bias = (self.param("bias", nn.initializers.zeros_init(), (self.features,), PARAM_DTYPE)
            if self.use_bias else None)
    x_BHWC, kernel, bias = nn.dtypes.promote_dtype(x_BHWC, kernel, bias, dtype=self.dtype)
    y = self.conv(x_BHWC, kernel)
    return y + bias if bias is not None else y


class ShardedConv(nn.Module):
  """A conv whose output filters are split `shards` ways over "model" (Krizhevsky's columns).

  Attributes:
    features: filters of the full (single-device) layer.
    kernel, stride, padding: square kernel size, stride and zero padding.
    shards: how many model devices share the filters (1 = the whole layer here).
    groups: local feature groups: a layer "connected only within its column" holds one group per
      local column; 1 for a layer that sees every input channel.
  """
  features: int
  kernel: int
  stride: int
  padding: int
  shards: int = 1
  groups: int = 1
  use_bias: bool = True
  dtype: jnp.dtype = jnp.float32  # compute dtype; the parameters are float32.
  implementation: str = "direct"  # STEM_CONVS; space_to_depth needs a stride > 1, one group.
  grouped: str = "feature_group_count"  # GROUPED_CONVS: how a conv of several groups runs.
  # nn.Conv's LeCun normal, or He et al.'s for the ResNets (`models.ResNetArchitecture.conv_init`).
  kernel_init: Callable = nn.initializers.lecun_normal()

  @nn.compact
  def __call__(self, x_BHWC: jax.Array) -> jax.Array:
    conv = None
    if self.implementation == "space_to_depth" and self.stride > 1 and self.groups == 1:
      conv = functools.partial(space_to_depth_conv, stride=self.stride, padding=self.padding)
    elif self.grouped == "per_group" and self.groups > 1:
      conv = functools.partial(per_group_conv, stride=self.stride, padding=self.padding,
                               groups=self.groups)
    if conv is not None:
      return _ConvParameters(self.features // self.shards, self.kernel, self.groups,
                             self.use_bias, self.dtype, conv, self.kernel_init,
                             name="conv")(x_BHWC)
    return nn.Conv(self.features // self.shards, (self.kernel, self.kernel),
                   strides=(self.stride, self.stride), padding=[(self.padding, self.padding)] * 2,
                   feature_group_count=self.groups, use_bias=self.use_bias, dtype=self.dtype,
                   kernel_init=self.kernel_init, name="conv")(x_BHWC)


class BatchNorm(nn.Module):
  """Batch normalisation over the batch and spatial axes, per channel (Ioffe & Szegedy 2015).

  Each device normalises its local channels with the statistics of its local batch ("per worker",
  as Goyal et al. 2017 prescribe), or, with `sync`, with the statistics of the whole batch split
  over `batch_axes`. The running averages used for evaluation are updated from the *mean* of the
  workers' batch statistics in both modes, so every worker keeps the same running statistics and
  they stay replicated like the parameters (a few hundred floats per step).

  Attributes:
    batch_axes: mesh axes this layer's batch is split over (empty on one device).
    sync: normalise with statistics over `batch_axes` instead of the local batch.
    momentum: decay of the running averages.
    epsilon: added to the variance.
    use_scale: a learned scale γ; without it γ = 1 (MXNet's `fix_gamma`, its input normalisation).
  """
  batch_axes: tuple[str, ...] = ()
  sync: bool = False
  momentum: float = 0.9
  epsilon: float = 1e-5
  use_scale: bool = True

  @nn.compact
  def __call__(self, x_BHWC: jax.Array, train: bool) -> jax.Array:
    channels = x_BHWC.shape[-1]
    scale = (self.param("scale", nn.initializers.ones_init(), (channels,), PARAM_DTYPE)
             if self.use_scale else 1.0)
    bias = self.param("bias", nn.initializers.zeros_init(), (channels,), PARAM_DTYPE)
    running_mean = self.variable("batch_stats", "mean", jnp.zeros, (channels,), PARAM_DTYPE)
    running_var = self.variable("batch_stats", "var", jnp.ones, (channels,), PARAM_DTYPE)
    # Statistics in float32 (in float64 for a float64 reference).
    x_BHWC, compute_dtype = x_BHWC.astype(at_least_float32(x_BHWC.dtype)), x_BHWC.dtype
    if train:
      # Two passes, the mean and then the mean square of the deviations from it, as PyTorch
      # computes them: E[x²] − E[x]² loses float32's digits where a channel's mean is large
      # against its spread (the ResNet's 1×1 convs of ReLU outputs: tests/models_test.py's
      # torchvision parity). Synchronised, each pass is averaged over the batch axes.
      average = (lambda v: jax.lax.pmean(v, self.batch_axes)) if (
          self.sync and self.batch_axes) else (lambda v: v)
      mean = average(jnp.mean(x_BHWC, (0, 1, 2)))
      var = average(jnp.mean(jnp.square(x_BHWC - mean), (0, 1, 2)))
      if not self.is_initializing():
        worker_mean = (mean, var)
        if self.batch_axes and not self.sync:
          worker_mean = jax.lax.pmean(worker_mean, self.batch_axes)
        decay = self.momentum
        running_mean.value = decay * running_mean.value + (1 - decay) * worker_mean[0]
        running_var.value = decay * running_var.value + (1 - decay) * worker_mean[1]
    else:
      mean, var = running_mean.value, running_var.value
    normalised = (x_BHWC - mean) * (jax.lax.rsqrt(var + self.epsilon) * scale) + bias
    return normalised.astype(compute_dtype)


class ColumnDense(nn.Module):
  """Dense layer with its output neurons split `shards` ways over "model".

  Input: the full feature vector (model-invariant). Output: this device's `features // shards`
  neurons. Parameters: kernel[in, features // shards], bias[features // shards].
  """
  features: int
  shards: int = 1
  dtype: jnp.dtype = jnp.float32  # compute dtype; the parameters are float32.

  @nn.compact
  def __call__(self, x_BI: jax.Array) -> jax.Array:
    return nn.Dense(self.features // self.shards, dtype=self.dtype, name="dense")(x_BI)


class RowDense(nn.Module):
  """Dense layer with its *input* rows split `shards` ways over "model", outputs summed.

  Input: this device's slice of the features (as a `ColumnDense` leaves them), so no gather is
  needed; the partial products are summed over "model" (one all-reduce of the small output) and the
  bias, kept whole on every device, is added once. Used for the classifier.
  """
  features: int
  shards: int = 1

  @nn.compact
  def __call__(self, x_BI: jax.Array) -> jax.Array:
    kernel = self.param("kernel", nn.initializers.lecun_normal(),
                        (x_BI.shape[-1], self.features), PARAM_DTYPE)  # local rows: I / shards
    bias = self.param("bias", nn.initializers.zeros_init(), (self.features,), PARAM_DTYPE)
    y_BO = x_BI @ kernel.astype(x_BI.dtype)  # in the activations' (compute) dtype.
    if self.shards > 1:
      y_BO = jax.lax.psum(y_BO, MODEL)
    return y_BO + bias


def example_dropout(x_BU: jax.Array, rate: float, *, key: jax.Array,
                    example_ids_B: jax.Array) -> jax.Array:
  """Inverted dropout whose mask depends on (key, global example index, unit index) only.

  The mask of example i is drawn from `fold_in(key, i)` over all U units, so it is the same
  whichever device holds example i — the property that makes every scheme equal the
  single-device run with dropout on.
  """
  if rate == 0.0:
    return x_BU
  # A float32 probability: the same mask bits under jax.enable_x64 (a float64 `p` draws 64-bit
  # uniforms).
  keep_BU = jax.vmap(lambda i: jax.random.bernoulli(jax.random.fold_in(key, i),
                                                    jnp.float32(1.0 - rate),
                                                    x_BU.shape[1:]))(example_ids_B)
  return jnp.where(keep_BU, x_BU / (1.0 - rate), 0.0).astype(x_BU.dtype)
