"""Krizhevsky's ImageNet augmentation as one jitted program on the devices that hold the batch.

The host only decodes and copies uint8 images at the stored size (256² for a 224 model,
prepared.py); here, on the global batch as it lies on the mesh, each image gets

  train  a random `image_size`² window (a contiguous crop, offsets uniform over the positions
         that fit), a horizontal flip with probability ½, PCA colour noise (Σᵢ αᵢ·λᵢ·vᵢ added to
         every pixel, αᵢ ~ N(0, σ²), as augment.lighting does with TensorFlow) and the
         per-channel normalisation — float32 out, uint8 in;
  eval   the centre crop, or the ten crops (the centre and four corners, then the same five
         flipped: (B, 10, s, s, C), the eval step averages their softmaxes) — as
         augment.imagenet_eval crops on the host.

An image's random draws come from (seed, step, its row of the global batch), so they do not
depend on the mesh, the process count or a restart; and every operation is per row, so the
program has no collective: each device augments the rows it holds.
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


def train_images(images_BHWC, *, key, image_size: int, pca_stddev: float, mean, scale):
  """Random crop, flip and lighting of uint8 `images_BHWC` (one key per row of `key`)."""
  channels, stored = images_BHWC.shape[-1], images_BHWC.shape[1:3]

  def one(image_HWC, row_key):
    crop_key, flip_key, light_key = jax.random.split(row_key, 3)
    top, left = (jax.random.randint(k, (), 0, extent - image_size + 1)
                 for k, extent in zip(jax.random.split(crop_key), stored))
    crop = jax.lax.dynamic_slice(image_HWC, (top, left, 0), (image_size, image_size, channels))
    crop = jnp.where(jax.random.bernoulli(flip_key), crop[:, ::-1], crop)
    crop = crop.astype(jnp.float32)  # the lighting shift is fractional
    if pca_stddev > 0 and channels == 3:
      alpha = pca_stddev * jax.random.normal(light_key, (3,))
      weights = alpha * jnp.asarray(imagenet_stats.EIGVAL, jnp.float32)
      eigvec = jnp.asarray(imagenet_stats.EIGVEC, jnp.float32)
      # V·(α∘λ) written out as products and sums: a dot's summation order is XLA's to choose
      # and differs with the rows a device holds (1 ulp in 1% of the values under JAX 0.12),
      # while element-wise arithmetic gives every row the same bits on any mesh.
      shift = eigvec[:, 0] * weights[0] + eigvec[:, 1] * weights[1] + eigvec[:, 2] * weights[2]
      crop = crop + 255.0 * shift
    return crop

  return normalise(jax.vmap(one)(images_BHWC, key), mean, scale)


def eval_images(images_BHWC, *, image_size: int, crops: int, mean, scale):
  """The centre crop (crops = 1: B×s×s×C) or the ten crops (crops = 10: B×10×s×s×C)."""
  height, width = images_BHWC.shape[1:3]

  def crop(corner):
    top, left = imagenet_stats.crop_offset(corner, height=height, width=width, size=image_size)
    return images_BHWC[:, top:top + image_size, left:left + image_size]

  if crops == 1:
    return normalise(crop("centre"), mean, scale)
  five = [crop(corner) for corner in imagenet_stats.TEN_CROP_ORDER]
  return normalise(jnp.stack(five + [c[:, :, ::-1] for c in five], axis=1), mean, scale)


def row_keys(seed: int, step, rows: int):
  """One key per row of the global batch of `step`."""
  step_key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), _SALT), step)
  return jax.vmap(lambda row: jax.random.fold_in(step_key, row))(jnp.arange(rows))


def train_transform(sharding: NamedSharding, *, seed: int, image_size: int, pca_stddev: float,
                    mean, std):
  """(uint8 global images, step) → the augmented float32 batch, on the devices of `sharding`."""
  mean, scale = np.float32(mean), np.float32(1.0) / np.float32(std)

  @jax.jit
  def transform(images_BHWC, step):
    # Keys laid out as the rows they draw for (explicit meshes require it; it is free).
    images_BHWC = lay_out(images_BHWC, sharding)
    keys = lay_out(row_keys(seed, step, images_BHWC.shape[0]), sharding)
    return lay_out(train_images(images_BHWC, key=keys, image_size=image_size,
                                 pca_stddev=pca_stddev, mean=mean, scale=scale), sharding)

  return lambda images, step: transform(images, np.int32(step))


def eval_transform(sharding: NamedSharding, *, image_size: int, crops: int, mean, std):
  """uint8 global images → the centre crop or ten crops, float32, on the devices of `sharding`."""
  mean, scale = np.float32(mean), np.float32(1.0) / np.float32(std)
  return jax.jit(lambda images: lay_out(eval_images(
      lay_out(images, sharding), image_size=image_size, crops=crops, mean=mean, scale=scale),
      sharding))


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
