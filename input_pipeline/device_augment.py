"""Krizhevsky's ImageNet augmentation on the devices that hold the batch, traced into the step.

The host only decodes and copies uint8 images at the stored size (256² for a 224 model,
prepared.py), or sends rows of a decoded set (decoded.py); here, on the global batch as it lies
on the mesh, each image gets

  train  a random `image_size`² window (a contiguous crop, offsets uniform over the positions
         that fit), a horizontal flip with probability ½, PCA colour noise (Σᵢ αᵢ·λᵢ·vᵢ added to
         every pixel, αᵢ ~ N(0, σ²), as augment.lighting does with TensorFlow) and the
         per-channel normalisation — the model's dtype out, uint8 in;
  eval   the centre crop, or the ten crops (the centre and four corners, then the same five
         flipped: (B, 10, s, s, C), the eval step averages their softmaxes) — as
         augment.imagenet_eval crops on the host.

A source says how a window is cut from one of its images (`window`): a slice of a uint8 image,
or (decoded.py) a YUV row turned into RGB on the window only. The functions here are traced into
the step's own program (experiment.fed_steps): the step's input work is part of its one program,
not programs of its own.

An image's random draws come from (seed, step, its row of the global batch), so they do not
depend on the mesh, the process count or a restart; and every operation is per row, so the
augmentation has no collective: each device augments the rows it holds.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding

from input_pipeline import imagenet_stats

_SALT = 0x1A6E  # keeps these draws apart from any other use of the run's seed.


def normalise(x_uint8, mean, scale):
  """uint8 images → float32, per channel: (x − mean) · scale (scale = 1 / std); NumPy or jax
  arrays alike, with the same bits: the input pipeline runs it on the devices, where XLA would
  not divide as NumPy does (it multiplies by a reciprocal), so the reciprocal is taken once, here."""
  return (x_uint8.astype(np.float32) - mean) * scale


def image_window(image_HWC, top, left, *, size: int):
  """The size² window of a uint8 image at (top, left)."""
  return jax.lax.dynamic_slice(image_HWC, (top, left, 0), (size, size, image_HWC.shape[-1]))


def train_images(images, *, key, image_size: int, stored: tuple[int, int], pca_stddev: float,
                 mean, scale, window=image_window, dtype=jnp.float32):
  """Random crop, flip and lighting of the images (one key per row of `key`): `window(image,
  top, left, size=)` cuts an image's uint8 RGB window; `stored` is the images' (height, width)."""

  def one(image, row_key):
    crop_key, flip_key, light_key = jax.random.split(row_key, 3)
    top, left = (jax.random.randint(k, (), 0, extent - image_size + 1)
                 for k, extent in zip(jax.random.split(crop_key), stored))
    crop = window(image, top, left, size=image_size)
    crop = jnp.where(jax.random.bernoulli(flip_key), crop[:, ::-1], crop)
    crop = crop.astype(jnp.float32)  # the lighting shift is fractional
    if pca_stddev > 0 and crop.shape[-1] == 3:
      alpha = pca_stddev * jax.random.normal(light_key, (3,))
      weights = alpha * jnp.asarray(imagenet_stats.EIGVAL, jnp.float32)
      eigvec = jnp.asarray(imagenet_stats.EIGVEC, jnp.float32)
      # V·(α∘λ) written out as products and sums: a dot's summation order is XLA's to choose
      # and differs with the rows a device holds (1 ulp in 1% of the values under JAX 0.12),
      # while element-wise arithmetic gives every row the same bits on any mesh.
      shift = eigvec[:, 0] * weights[0] + eigvec[:, 1] * weights[1] + eigvec[:, 2] * weights[2]
      crop = crop + 255.0 * shift
    return crop

  # The model casts its input to its dtype first: casting here gives it the same bits, and the
  # program moves half the bytes where the model computes in bfloat16.
  return normalise(jax.vmap(one)(images, key), mean, scale).astype(dtype)


def eval_images(images, *, image_size: int, stored: tuple[int, int], crops: int, mean, scale,
                window=image_window, dtype=jnp.float32):
  """The centre crop (crops = 1: B×s×s×C) or the ten crops (crops = 10: B×10×s×s×C)."""
  height, width = stored

  def crop(corner):
    top, left = imagenet_stats.crop_offset(corner, height=height, width=width, size=image_size)
    return jax.vmap(lambda image: window(image, top, left, size=image_size))(images)

  if crops == 1:
    return normalise(crop("centre"), mean, scale).astype(dtype)
  five = [crop(corner) for corner in imagenet_stats.TEN_CROP_ORDER]
  return normalise(jnp.stack(five + [c[:, :, ::-1] for c in five], axis=1), mean,
                   scale).astype(dtype)


def row_keys(seed: int, step, rows: int):
  """One key per row of the global batch of `step`."""
  step_key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), _SALT), step)
  return jax.vmap(lambda row: jax.random.fold_in(step_key, row))(jnp.arange(rows))


def finishes(sharding: NamedSharding, *, seed: int, image_size: int, stored: tuple[int, int],
             pca_stddev: float, mean, std, crops: int = 1, window=image_window,
             dtype=jnp.float32):
  """(train(images, step), evaluate(images)): traceable functions that finish a global batch
  laid out as `sharding` into the model's `dtype` (see train_images, eval_images)."""
  mean, scale = np.float32(mean), np.float32(1.0) / np.float32(std)

  def train(images, step):
    # Keys laid out as the rows they draw for (explicit meshes require it; it is free).
    images = lay_out(images, sharding)
    keys = lay_out(row_keys(seed, step, images.shape[0]), sharding)
    return lay_out(train_images(images, key=keys, image_size=image_size, stored=stored,
                                pca_stddev=pca_stddev, mean=mean, scale=scale, window=window,
                                dtype=dtype), sharding)

  def evaluate(images):
    return lay_out(eval_images(lay_out(images, sharding), image_size=image_size, stored=stored,
                               crops=crops, mean=mean, scale=scale, window=window, dtype=dtype),
                   sharding)

  return train, evaluate


def lay_out(x, sharding: NamedSharding):
  """`x` laid out as `sharding` says: a reshard on a mesh of Explicit axes, a constraint on Auto
  ones (the backends' meshes, hybrid_parallel.mesh: Explicit for explicit and pmap, Auto for
  gspmd)."""
  if _explicit(sharding):
    return jax.sharding.reshard(x, sharding)
  return jax.lax.with_sharding_constraint(x, sharding)


def gather_rows(x, rows, sharding: NamedSharding):
  """Rows `rows` of `x` (whole on every device), laid out as `sharding` says — the one gather of
  the sources whose set lies on the devices. On a mesh of Explicit axes the gather names its
  output's sharding (JAX cannot infer one from a replicated operand and sharded indices); on
  Auto axes, which `.get(out_sharding=...)` refuses, XLA's partitioner places the gather and a
  constraint says where its result goes."""
  if _explicit(sharding):
    return x.at[rows].get(out_sharding=sharding)
  return jax.lax.with_sharding_constraint(x[rows], sharding)


def _explicit(sharding: NamedSharding) -> bool:
  return any(t == AxisType.Explicit for t in sharding.mesh.axis_types)
