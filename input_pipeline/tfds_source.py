"""TensorFlow Datasets sources: ImageNet, Imagenette, CIFAR-10/100, MNIST, Fashion-MNIST.

Sharding. Each split is cut into `input_shards` (K) even shards (`tfds.even_splits`). Shard
k fills rows [k·b, (k+1)·b) of every global batch (b = global_batch / K), from its own endless,
reshuffled stream. A process reads only the shards whose rows it contributes — with P processes,
process p reads shards [p·K/P, (p+1)·K/P), together the p-th even share of the split, as
`tfds.split_for_jax_process` would give it. So the global batch of a step is the same for any
number of processes that divides K, any mesh and any scheme.

Positions. Shard k's stream is its epochs end to end, epoch e shuffled with a seed of (seed, k, e).
An example's position in that stream (epoch·L + index) seeds its augmentation and is what the
pipeline's *position* records: after each batch, the next position of every shard. A checkpoint
stores it, and a restart rebuilds every stream from there — the batch after the checkpoint's, no
repeats, no skips. Undecodable images are dropped (and counted in the log); because positions
count records before decoding, a dropped image never shifts another one's position.

Caching. Datasets that fit in memory (all but imagenet2012) are decoded once — and, ImageNet-style,
resized to the shorter side — then held in memory (`Dataset.cache`); an epoch's shuffle then
covers a whole shard. imagenet2012 is read, shuffled (a `shuffle_buffer`-record buffer per
shard, of still-encoded JPEGs) and decoded every epoch.
"""

import dataclasses
import math
import os

import jax
import numpy as np
from absl import logging

import input_pipeline
from hybrid_parallel import metric_writers
from hybrid_parallel.errors import UserError
from input_pipeline import augment, imagenet_stats
from input_pipeline.imagenet_stats import MEAN as IMAGENET_MEAN, STD as IMAGENET_STD
from input_pipeline.source import Source

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's C++ INFO/WARNING lines are noise here.
import tensorflow as tf  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

# JAX owns the accelerators; TensorFlow only runs the input pipeline on the host's CPUs.
tf.config.set_visible_devices([], "GPU")
metric_writers.quiet_info_from("tensorflow_datasets")


@dataclasses.dataclass(frozen=True)
class Spec:
  """How one tfds dataset is split, augmented and held."""
  style: str  # "imagenet" or "pad_crop" (see augment.py)
  eval_split: str
  mean: tuple  # per channel, 0..255 units (the values published with each dataset)
  std: tuple
  flip: bool = True  # horizontal flips in training (not for digits)
  cache: bool = True  # decoded images fit in host memory
  manual_download: bool = False


SPECS = {
    "imagenet2012": Spec("imagenet", "validation", IMAGENET_MEAN, IMAGENET_STD, cache=False,
                         manual_download=True),
    "imagenette/320px-v2": Spec("imagenet", "validation", IMAGENET_MEAN, IMAGENET_STD),
    "cifar10": Spec("pad_crop", "test", (125.3, 123.0, 113.9), (63.0, 62.1, 66.7)),
    "cifar100": Spec("pad_crop", "test", (129.3, 124.1, 112.4), (68.2, 65.4, 70.4)),
    "mnist": Spec("pad_crop", "test", (33.3,), (78.6,), flip=False),
    "fashion_mnist": Spec("pad_crop", "test", (72.9,), (90.0,)),
}

_NO_MORE_EPOCHS = 2**40  # the end of an "endless" stream of epochs


def _traced(fn):
  """`fn` for tf.data to trace as it is, without AutoGraph. By default tf.data passes each function
  through AutoGraph, which parses and rewrites its source and that of the functions it calls
  (measured in two of tests/tfds_input_test.py's tests: 125 conversions, 7.9 s of their 21 s).
  These need none of it: they branch on Python values only, and augment.py decides on tensors
  with tf.cond and tf.switch_case."""
  return tf.autograph.experimental.do_not_convert(fn)


def _prepared_builder(name: str, spec: Spec, data_dir: str | None, download: bool):
  """The tfds builder of `name`, downloaded and prepared if it may be; else one UserError."""
  builder = tfds.builder(name, data_dir=data_dir)
  where = str(builder.data_dir_root)  # the data_dir given, or tfds's default
  if builder.is_prepared():
    return builder
  if spec.manual_download:
    how = (f"{name} is not prepared in {where}: download ILSVRC2012_img_train.tar and "
           f"ILSVRC2012_img_val.tar from image-net.org (free registration) into "
           f"{os.path.join(where, 'downloads', 'manual')}, run `tfds build {name} --data_dir="
           f"{where}` once (hours), and set config.data_dir to {where}.")
  else:
    how = (f"{name} is not prepared in {where} and could not be downloaded; on a machine with "
           f"internet run `tfds build {name} --data_dir=DIR`, copy DIR here and set "
           f"config.data_dir to it.")
  if not download:
    raise UserError(how.replace(" and could not be downloaded", "") +
                    " (config.tfds_download is False, so nothing was downloaded)")
  try:
    builder.download_and_prepare()  # a no-op under tfds.testing.mock_data
  except Exception as e:  # tfds raises AssertionError, DownloadError, OSError, ... here.
    first_line = (str(e).strip().splitlines() or [type(e).__name__])[0]
    raise UserError(f"{how} ({type(e).__name__}: {first_line})") from None
  return builder


def _describe(split) -> str:
  """"train shard 2/8" for an even split."""
  return f"{split.split} shard {split.index + 1}/{split.count}"


def _count(dataset: tf.data.Dataset) -> int:
  return int(dataset.reduce(np.int64(0), _traced(lambda n, _: n + 1)))


class TfdsDataset(Source):
  """A tfds dataset read in `input_shards` shards; see the module docstring. Its batches arrive
  finished (augmented by tf.data) and its position is every shard's stream position."""
  positions_are_steps = False

  def __init__(self, name: str, *, image_size: int, data_dir: str | None = None,
               download: bool = True, input_shards: int = 8, shuffle_buffer: int = 2048,
               pca_lighting_std: float = 0.1, eval_crops: int = 1):
    self.name, self.spec = name, SPECS[name]
    self.builder = _prepared_builder(name, self.spec, data_dir or None, download)
    features = self.builder.info.features
    self.num_classes = features["label"].num_classes
    self.channels = features["image"].shape[-1]
    self.image_size = image_size
    self.shards = input_shards
    self.shuffle_buffer = shuffle_buffer
    self.pca_stddev = pca_lighting_std
    self.eval_crops = eval_crops  # input_pipeline.check_eval_crops: 10 for ImageNet-style only.
    self._train_splits = tfds.even_splits("train", self.shards)
    self._eval_splits = tfds.even_splits(self.spec.eval_split, self.shards)
    # split → its records, decoded and cached where the dataset fits. All are built here: the
    # builder is only asked for its splits while this object is made (and mocked, in tests).
    self._records = {}
    for split in self._train_splits + self._eval_splits:
      self.records(split)
    self._train_lengths = [self._length(s) for s in self._train_splits]
    self._eval_lengths = [self._length(s, counted_after_decoding=False) for s in self._eval_splits]
    self.num_train = sum(self._train_lengths)
    self.num_eval = sum(self._eval_lengths)
    logging.info("%s: %d training and %d %s images in %d shards%s", name, self.num_train,
                 self.num_eval, self.spec.eval_split, self.shards,
                 ", decoded once and cached in memory" if self.spec.cache else "")

  # --- records ---------------------------------------------------------------------------------

  def _read(self, split) -> tf.data.Dataset:
    """(encoded image, label) records of `split`, in their stored order."""
    ds = self.builder.as_dataset(split=split, shuffle_files=False,
                                 decoders={"image": tfds.decode.SkipDecoding()})
    return ds.map(_traced(lambda ex: (ex["image"], tf.cast(ex["label"], tf.int32))))

  def _decode(self, encoded, label):
    shorter = imagenet_stats.resize_size(self.image_size) if self.spec.style == "imagenet" else None
    return augment.decode(encoded, self.channels, shorter), label

  def records(self, split) -> tf.data.Dataset:
    """The split's records as they enter the shuffle: decoded and cached, or still encoded."""
    if split not in self._records:
      ds = self._read(split)
      if self.spec.cache:
        ds = ds.map(_traced(self._decode), num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.ignore_errors().cache()
      self._records[split] = ds
    return self._records[split]

  def _length(self, split, counted_after_decoding: bool = True) -> int:
    """Records in one epoch of `split`'s stream.

    Cached: the images that decoded (counting them fills the cache, the one decoding pass).
    Otherwise the split's size from the dataset's metadata, or counted when it has none (a
    mocked dataset).
    """
    if self.spec.cache and counted_after_decoding:
      stored = self._stored_length(split)
      decoded = _count(self.records(split))
      if decoded < stored:
        logging.warning("%s %s: skipped %d undecodable image(s) of %d.", self.name,
                        _describe(split), stored - decoded, stored)
      return decoded
    return self._stored_length(split)

  def _stored_length(self, split) -> int:
    try:
      return self.builder.info.splits[split].num_examples
    except (KeyError, ValueError):
      return _count(self._read(split))

  # --- the source interface (source.py) ---------------------------------------------------------

  def position_at(self, step: int, global_batch: int) -> list[int]:
    """The position after `step` steps when no image was ever skipped (older checkpoints)."""
    return [step * (global_batch // self.shards)] * self.shards

  def local_shards(self, rows: slice, global_batch: int) -> range:
    """The shards that fill `rows` of a global batch (this process's rows)."""
    input_pipeline.check_input_shards(self.shards, processes=jax.process_count(),
                                      batch=global_batch)
    per_shard = global_batch // self.shards
    if (rows.stop - rows.start) % per_shard:
      raise UserError(f"process {jax.process_index()} holds {rows.stop - rows.start} rows of a "
                      f"batch of {global_batch}: not whole input shards of {per_shard}; use "
                      f"input_shards that cut each process's rows evenly.")
    return range(rows.start // per_shard, rows.stop // per_shard)

  def train_split(self, shard: int):
    """The tfds split (an even share of "train") that input shard `shard` reads."""
    return self._train_splits[shard]

  def _train_stream(self, shard: int, seed: int, start: int, per_shard: int):
    """Shard `shard`'s augmented examples (image, label, position) from position `start`."""
    split, length = self._train_splits[shard], self._train_lengths[shard]
    if length == 0:
      raise UserError(f"{self.name}: input shard {shard} of the training split holds no images.")
    records = self.records(split)
    buffer = length if self.spec.cache else min(length, self.shuffle_buffer)
    stream_seed = (seed * 65_537 + shard) * 2**20  # + epoch: one shuffle seed per (seed, k, e)

    def epoch(e):
      shuffled = records.shuffle(buffer, seed=tf.cast(stream_seed + e, tf.int64),
                                 reshuffle_each_iteration=False)
      return shuffled.enumerate().map(
          _traced(lambda i, r: (r, tf.cast(e, tf.int64) * length + i)))

    first_epoch, offset = divmod(start, length)
    ds = epoch(first_epoch).skip(offset).concatenate(
        tf.data.Dataset.range(first_epoch + 1, _NO_MORE_EPOCHS).flat_map(_traced(epoch)))
    if not self.spec.cache:
      ds = ds.map(_traced(lambda r, p: (self._decode(*r), p)),
                  num_parallel_calls=tf.data.AUTOTUNE)
      ds = ds.ignore_errors()  # an undecodable image drops out; its position stays unused.
    augment_seed = stream_seed + 2**19  # distinct from every shuffle seed

    def augmented(record, position):
      image, label = record
      example_seed = tf.stack([tf.constant(augment_seed, tf.int64), position])
      if self.spec.style == "imagenet":
        image = augment.imagenet_train(image, example_seed, image_size=self.image_size,
                                       pca_stddev=self.pca_stddev, mean=self.spec.mean,
                                       std=self.spec.std)
      else:
        image = augment.pad_crop_train(image, example_seed, image_size=self.image_size,
                                       flip=self.spec.flip, mean=self.spec.mean,
                                       std=self.spec.std)
      return image, label, position

    ds = ds.map(_traced(augmented), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(per_shard, drop_remainder=True)

  def train_batches(self, global_batch: int, *, seed: int, position: list[int], shard: slice):
    """Yields (images, labels, position) for this process's rows `shard` of each global batch.

    `position` holds every shard's next stream position; the yielded one is the position after
    the batch (shards of other processes keep their entries).
    """
    position = list(position)
    if len(position) != self.shards:
      raise UserError(f"the checkpoint's data position has {len(position)} shards, but "
                      f"input_shards is {self.shards}; resume with the same input_shards.")
    shards = self.local_shards(shard, global_batch)
    per_shard = global_batch // self.shards
    streams = tuple(self._train_stream(k, seed, position[k], per_shard) for k in shards)
    ds = tf.data.Dataset.zip(streams).map(_traced(
        lambda *s: (tf.concat([i for i, _, _ in s], 0), tf.concat([y for _, y, _ in s], 0),
                    tf.stack([p[-1] + 1 for _, _, p in s]))))
    skipped = 0
    for images, labels, next_positions in ds.prefetch(2).as_numpy_iterator():
      newly_skipped = 0
      for k, next_position in zip(shards, next_positions):
        newly_skipped += int(next_position) - position[k] - per_shard
        position[k] = int(next_position)
      if newly_skipped:
        skipped += newly_skipped
        logging.warning("%s: skipped %d undecodable training image(s) (%d so far).", self.name,
                        newly_skipped, skipped)
      yield images, labels, list(position)

  def eval_batches(self, batch: int, shard: slice):
    """Yields (images, labels, weights) for this process's rows of each evaluation batch; every
    shard is padded with weight-0 images to the longest shard's number of batches."""
    shards = self.local_shards(shard, batch)
    per_shard = batch // self.shards
    num_batches = math.ceil(max(self._eval_lengths) / per_shard)
    image_shape = [self.image_size, self.image_size, self.channels]
    if self.eval_crops == 10:
      image_shape = [10] + image_shape

    def evaluated(image, label):
      if self.spec.style == "imagenet":
        image = augment.imagenet_eval(image, image_size=self.image_size, crops=self.eval_crops,
                                      mean=self.spec.mean, std=self.spec.std)
      else:
        image = augment.pad_crop_eval(image, image_size=self.image_size, mean=self.spec.mean,
                                      std=self.spec.std)
      return image, label, tf.constant(1.0)

    padding = tf.data.Dataset.from_tensors(
        (tf.zeros(image_shape), tf.constant(0, tf.int32), tf.constant(0.0))).repeat()
    streams = []
    for k in shards:
      ds = self.records(self._eval_splits[k])
      if not self.spec.cache:
        ds = ds.map(_traced(self._decode), num_parallel_calls=tf.data.AUTOTUNE).ignore_errors()
      ds = ds.map(_traced(evaluated), num_parallel_calls=tf.data.AUTOTUNE).concatenate(padding)
      streams.append(ds.take(num_batches * per_shard).batch(per_shard))
    ds = tf.data.Dataset.zip(tuple(streams)).map(_traced(
        lambda *s: tuple(tf.concat([part[i] for part in s], 0) for i in range(3))))
    yield from ds.prefetch(2).as_numpy_iterator()
