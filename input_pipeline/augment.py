"""Decoding and augmentation as TensorFlow ops, for the tf.data maps of tfds_source.py.

Two styles:
  imagenet   Krizhevsky et al. 2012: decode, resize the shorter side to 256 for a 224 input
             (imagenet_stats.resize_size), then a random `image_size`² crop, a horizontal flip
             half the time and PCA colour ("lighting") noise — each image plus Σᵢ αᵢ·λᵢ·vᵢ with
             αᵢ ~ N(0, σ²), σ = 0.1, (λᵢ, vᵢ) the eigenvalues / eigenvectors of ImageNet's RGB pixel covariance.
             Evaluation: the centre crop, or ten crops (four corners and the centre, each also
             flipped) whose softmaxes the eval step averages.
  pad_crop   CIFAR: pad 4 pixels of zeros on each side, a random crop back to the native size, a
             flip (where the dataset allows it), then a resize to the model's input size.
             Evaluation: the resize only.

Images are normalised last, per channel, with the dataset's mean and std (in 0..255 units).

Every random choice takes a stateless seed, so an example's augmentation is a function of (seed,
shard, its position in the stream): the same in every run, process count and restart.
"""

import tensorflow as tf

from input_pipeline.imagenet_stats import EIGVAL, EIGVEC, TEN_CROP_ORDER, crop_offset

CIFAR_PADDING = 4


def decode(encoded: tf.Tensor, channels: int, shorter_side: int | None = None) -> tf.Tensor:
  """Decodes a JPEG or PNG to uint8 HWC, optionally resized so that its shorter side has length
  `shorter_side`.

  A JPEG more than twice as large as needed is decoded at 1/2, 1/4 or 1/8 scale in the DCT domain
  (libjpeg's `ratio`): most of an ImageNet image's decoding cost, saved before the resize.
  """
  if shorter_side is None:
    return tf.io.decode_image(encoded, channels=channels, expand_animations=False)

  def decode_jpeg_scaled():
    height_width = tf.image.extract_jpeg_shape(encoded)[:2]
    shortest = tf.reduce_min(height_width)
    # Index 0..3 → ratio 1, 2, 4, 8: the largest ratio that still leaves `shorter_side` pixels.
    index = tf.reduce_sum(tf.cast(shortest >= shorter_side * tf.constant([2, 4, 8]), tf.int32))
    return tf.switch_case(index, [
        lambda r=r: tf.image.decode_jpeg(encoded, channels=channels, ratio=r) for r in (1, 2, 4, 8)
    ])

  image = tf.cond(tf.io.is_jpeg(encoded), decode_jpeg_scaled,
                  lambda: tf.io.decode_image(encoded, channels=channels, expand_animations=False))
  return resize_shorter_side(image, shorter_side)


def resize_shorter_side(image: tf.Tensor, size: int) -> tf.Tensor:
  """Resizes uint8 HWC so that its shorter side is `size`, keeping the aspect ratio; uint8."""
  height_width = tf.cast(tf.shape(image)[:2], tf.float32)
  scale = size / tf.reduce_min(height_width)
  new_size = tf.maximum(tf.cast(tf.round(height_width * scale), tf.int32), size)
  resized = tf.image.resize(image, new_size, method="bilinear", antialias=True)
  return tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8)


def lighting(image: tf.Tensor, seed: tf.Tensor, stddev: float) -> tf.Tensor:
  """Krizhevsky's PCA colour noise on float HWC pixels in 0..255 units."""
  alpha = tf.random.stateless_normal([3], seed=seed, stddev=stddev)
  eigvec = tf.constant(EIGVEC, tf.float32)
  shift_rgb = 255.0 * tf.linalg.matvec(eigvec, alpha * tf.constant(EIGVAL, tf.float32))
  return image + shift_rgb


def normalise(image: tf.Tensor, mean, std) -> tf.Tensor:
  return (tf.cast(image, tf.float32) - tf.constant(mean, tf.float32)) / tf.constant(std, tf.float32)


def imagenet_train(image, seed, *, image_size: int, pca_stddev: float, mean, std):
  """Random crop, flip and lighting of an image whose shorter side is ≥ `image_size`."""
  crop_seed, flip_seed, light_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
  crop = tf.image.stateless_random_crop(image, [image_size, image_size, tf.shape(image)[2]],
                                        seed=crop_seed)
  crop = tf.cast(tf.image.stateless_random_flip_left_right(crop, seed=flip_seed), tf.float32)
  if pca_stddev > 0:
    crop = lighting(crop, light_seed, pca_stddev)
  return normalise(crop, mean, std)


def _crop(image, corner: str, size: int):
  top, left = crop_offset(corner, height=tf.shape(image)[0], width=tf.shape(image)[1], size=size)
  return tf.image.crop_to_bounding_box(image, top, left, size, size)


def imagenet_eval(image, *, image_size: int, crops: int, mean, std):
  """The centre crop (crops = 1, HWC) or the ten crops (crops = 10, 10×HWC: five, then the same
  five flipped)."""
  if crops == 1:
    return normalise(_crop(image, "centre", image_size), mean, std)
  five = [_crop(image, corner, image_size) for corner in TEN_CROP_ORDER]
  return normalise(tf.stack(five + [tf.image.flip_left_right(c) for c in five]), mean, std)


def _to_model_size(image, image_size: int):
  if image.shape[0] == image_size and image.shape[1] == image_size:
    return tf.cast(image, tf.float32)
  return tf.image.resize(image, [image_size, image_size], method="bilinear")


def pad_crop_train(image, seed, *, image_size: int, flip: bool, mean, std):
  """Pad-and-crop (and a flip when `flip`) at the native size, then the resize to the model's."""
  crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
  padded = tf.pad(image, [[CIFAR_PADDING, CIFAR_PADDING], [CIFAR_PADDING, CIFAR_PADDING], [0, 0]])
  crop = tf.image.stateless_random_crop(padded, tf.shape(image), seed=crop_seed)
  if flip:
    crop = tf.image.stateless_random_flip_left_right(crop, seed=flip_seed)
  crop = tf.ensure_shape(crop, image.shape)
  return normalise(_to_model_size(crop, image_size), mean, std)


def pad_crop_eval(image, *, image_size: int, mean, std):
  return normalise(_to_model_size(image, image_size), mean, std)
