"""The tfds input pipeline: the real tfds code path under `tfds.testing.mock_data`, and real
tfrecord files (a prepared `mnist` written by tfds's own DummyMnist builder) where the split
arithmetic and corrupt records must be real."""

import functools
import math
import os
import tempfile

import jax
import numpy as np
from absl.testing import absltest
from jax.sharding import NamedSharding, PartitionSpec as P

import experiment
import input_pipeline
import train
from hybrid_parallel import checkpointing
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel.errors import UserError
from input_pipeline import imagenet_stats
from tests import testing

testing.skip_module_without_tensorflow(__name__)

# After the skip: on a machine without TensorFlow the module is skipped, not an import error.
import tensorflow as tf  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

from input_pipeline import augment  # noqa: E402  (imports TensorFlow)
from tests import tfds_testing  # noqa: E402

MOCK_EXAMPLES = 24  # per split (mock_data ignores split slicing: every shard holds these)
_tmp = tfds_testing.TMP


@functools.lru_cache(maxsize=None)
def mocked(name, examples=MOCK_EXAMPLES, **overrides):
  """A source for `name` under mock_data (the context stays open only while it is built).

  Built once per set of arguments and shared by the tests: a source keeps no reading state (each
  `train_batches` or `eval_batches` call starts its own streams), and building one — the mocked
  builder, every shard's records decoded and counted — is most of a test's time."""
  config = testing.tiny_config(dataset=name, data_dir=os.path.join(_tmp, "empty"),
                               input_shards=4, **overrides)
  with tfds.testing.mock_data(num_examples=examples):
    return experiment.load_dataset(experiment.resolve(config))


def real_mnist(corrupt_train_records=(), **overrides):
  config = testing.tiny_config(dataset="mnist", input_shards=4,
                               data_dir=tfds_testing.prepared_mnist_dir(
                                   tuple(corrupt_train_records)),
                               tfds_download=False, **overrides)
  return experiment.load_dataset(experiment.resolve(config))


def take(source, steps, batch=8, position=None, rows=None, seed=0):
  position = position or source.position_at(0, batch)
  batches = source.train_batches(batch, seed=seed, position=position,
                                 shard=rows or slice(0, batch))
  return [next(batches) for _ in range(steps)]


class ShapesTest(absltest.TestCase):

  def test_cifar10_batches(self):
    source = mocked("cifar10", pca_lighting_std=0.0)
    (images, labels, position), = take(source, 1)
    self.assertEqual((images.shape, images.dtype), ((8, 64, 64, 3), np.float32))
    self.assertEqual(labels.dtype, np.int32)
    self.assertTrue(np.all((labels >= 0) & (labels < 10)))
    self.assertEqual(position, [2, 2, 2, 2])  # 2 rows of the batch from each of 4 shards
    # Normalised pixels map back into 0..255 (bilinear resizing cannot overshoot).
    pixels = images * np.array(source.spec.std) + np.array(source.spec.mean)
    self.assertGreaterEqual(pixels.min(), -1e-3)
    self.assertLessEqual(pixels.max(), 255 + 1e-3)
    self.assertEqual((source.num_classes, source.channels), (10, 3))

  def test_imagenet2012_batches_and_ten_crop_evaluation(self):
    source = mocked("imagenet2012", eval_crops=10)
    (images, labels, _), = take(source, 1)
    self.assertEqual(images.shape, (8, 64, 64, 3))
    self.assertTrue(np.all((labels >= 0) & (labels < 1000)))
    images, labels, weights = next(source.eval_batches(8, slice(0, 8)))
    self.assertEqual(images.shape, (8, 10, 64, 64, 3))
    np.testing.assert_array_equal(weights, np.ones(8))
    # Crops 5..9 are crops 0..4 flipped.
    np.testing.assert_array_equal(images[:, 5:], images[:, :5, :, ::-1])

  def test_mnist_is_one_channel(self):
    (images, _, _), = take(mocked("mnist"), 1)
    self.assertEqual(images.shape, (8, 64, 64, 1))

  def test_evaluation_is_deterministic_and_padded(self):
    source = mocked("cifar10")
    first = list(source.eval_batches(12, slice(0, 12)))
    second = list(source.eval_batches(12, slice(0, 12)))
    self.assertLen(first, math.ceil(MOCK_EXAMPLES / 3))  # each shard fills 3 rows per batch
    for a, b in zip(first, second):
      for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    self.assertEqual(sum(w.sum() for _, _, w in first), 4 * MOCK_EXAMPLES)


class AugmentTest(absltest.TestCase):

  @staticmethod
  def coordinates(height, width):
    """A uint8 image whose channels are its row and column (and 0)."""
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    return tf.constant(np.stack([rows, cols, np.zeros_like(rows)], -1).astype(np.uint8))

  def test_imagenet_crop_is_a_window_flipped_about_half_the_time(self):
    image, size = self.coordinates(40, 50), 24
    flips, offsets = 0, set()
    trials = 200
    for i in range(trials):
      out = augment.imagenet_train(image, tf.constant([7, i], tf.int64), image_size=size,
                                   pca_stddev=0.0, mean=(0., 0., 0.), std=(1., 1., 1.)).numpy()
      self.assertEqual(out.shape, (size, size, 3))
      rows, cols = out[:, 0, 0], out[0, :, 1]
      np.testing.assert_array_equal(rows, rows[0] + np.arange(size))  # a contiguous window
      flipped = cols[0] > cols[-1]
      flips += flipped
      left = cols[-1] if flipped else cols[0]
      np.testing.assert_array_equal(np.sort(cols), left + np.arange(size))
      self.assertLessEqual(rows[-1], 39)
      self.assertLessEqual(left + size - 1, 49)
      offsets.add((rows[0], left))
    self.assertBetween(flips / trials, 0.4, 0.6)
    self.assertGreater(len(offsets), 50)

  def test_pca_lighting_has_the_documented_scale(self):
    grey = tf.fill([4, 4, 3], 128.0)
    eigvec, eigval = np.array(augment.EIGVEC), np.array(augment.EIGVAL)
    coefficients = []
    for i in range(2000):
      shift = (augment.lighting(grey, tf.constant([3, i], tf.int64), 0.1).numpy() - 128.0)
      np.testing.assert_allclose(shift, np.broadcast_to(shift[0, 0], shift.shape), atol=1e-4)
      coefficients.append(eigvec.T @ shift[0, 0] / 255.0)  # α_i·λ_i along each component
    coefficients = np.array(coefficients)
    np.testing.assert_allclose(coefficients.std(0), 0.1 * eigval, rtol=0.1)
    # The mean is 0 within 4 standard errors (σ/√2000 ≈ 2.2% of σ).
    np.testing.assert_array_less(np.abs(coefficients.mean(0)), 4 * 0.1 * eigval / np.sqrt(2000))

  def test_cifar_pad_crop_shifts_by_at_most_the_padding(self):
    image = self.coordinates(32, 32)
    shifts = set()
    for i in range(100):
      out = augment.pad_crop_train(image + 1, tf.constant([1, i], tf.int64), image_size=32,
                                   flip=False, mean=(0., 0., 0.), std=(1., 1., 1.)).numpy()
      inside = out[..., 0] > 0  # pixels from the image (the padding is 0)
      r, c = np.argwhere(inside)[0]
      dr, dc = int(out[r, c, 0]) - 1 - r, int(out[r, c, 1]) - 1 - c
      self.assertLessEqual(max(abs(dr), abs(dc)), augment.CIFAR_PADDING)
      shifts.add((dr, dc))
    self.assertGreater(len(shifts), 20)

  def test_shorter_side_resize_keeps_the_aspect_ratio(self):
    out = augment.resize_shorter_side(tf.zeros([300, 500, 3], tf.uint8), 256)
    self.assertEqual(tuple(out.shape), (256, 427, 3))
    self.assertEqual(imagenet_stats.resize_size(224), 256)


class OrderTest(absltest.TestCase):

  def test_two_processes_read_disjoint_shards_whose_union_is_the_split(self):
    source = real_mnist()
    with_ids = tfds.ReadConfig(add_tfds_id=True)  # "<file>__<record index>": unique per record

    def ids(split):
      return [ex["tfds_id"] for ex in tfds.as_numpy(source.builder.as_dataset(
          split=split, read_config=with_ids, decoders={"image": tfds.decode.SkipDecoding()}))]

    per_process = [sum((ids(source.train_split(k)) for k in source.local_shards(
        slice(4 * p, 4 * p + 4), 8)), []) for p in range(2)]
    self.assertEqual([len(ids) for ids in per_process], [10, 10])
    self.assertEmpty(set(per_process[0]) & set(per_process[1]))
    self.assertEqual(set(per_process[0]) | set(per_process[1]), set(ids("train")))
    self.assertLen(set(ids("train")), 20)

  def test_global_batches_do_not_depend_on_the_number_of_processes(self):
    source = mocked("cifar10")
    whole = take(source, 5)
    halves = [take(source, 5, rows=slice(4 * p, 4 * p + 4)) for p in range(2)]
    for step, (images, labels, _) in enumerate(whole):
      np.testing.assert_array_equal(images, np.concatenate([h[step][0] for h in halves]))
      np.testing.assert_array_equal(labels, np.concatenate([h[step][1] for h in halves]))

  def test_global_arrays_are_the_same_on_every_mesh(self):
    source = mocked("cifar10")
    results = []
    for data, model in ((1, 1), (4, 1), (2, 2)):
      sharding = NamedSharding(mesh_lib.make_mesh(data, model), P("data"))
      batches = input_pipeline.train_iterator(source, sharding, 8, seed=0,
                                              position=source.position_at(0, 8))
      results.append([jax.device_get(next(batches)[0]) for _ in range(2)])
    for other in results[1:]:
      np.testing.assert_array_equal(np.stack(results[0]), np.stack(other))

  def test_resume_continues_with_the_next_batch_across_an_epoch_boundary(self):
    source = mocked("cifar10")
    steps_per_epoch = MOCK_EXAMPLES // 2  # 2 rows per shard per batch
    run = take(source, steps_per_epoch + 3)
    for stop in (3, steps_per_epoch - 1):
      resumed = take(source, 2, position=run[stop - 1][2])
      for (images, labels, position), expected in zip(resumed, run[stop:]):
        np.testing.assert_array_equal(images, expected[0])
        np.testing.assert_array_equal(labels, expected[1])
        self.assertEqual(position, expected[2])

  def test_an_epoch_visits_every_record_once_then_reshuffles(self):
    source = real_mnist(pca_lighting_std=0.0)
    epoch = take(source, 5, batch=4)  # 5 records per shard, 1 row per shard per batch
    labels = np.concatenate([b[1] for b in epoch])
    stored = np.array([int(y) for _, y in tfds.as_numpy(source.builder.as_dataset(
        split="train", decoders={"image": tfds.decode.SkipDecoding()}).map(
            lambda ex: (ex["image"], ex["label"])))])
    self.assertEqual(sorted(labels), sorted(stored))
    next_epoch = take(source, 5, batch=4, position=epoch[-1][2])
    self.assertFalse(np.array_equal(labels, np.concatenate([b[1] for b in next_epoch])))

  def test_the_seed_changes_the_order(self):
    source = mocked("cifar10")
    self.assertFalse(np.array_equal(take(source, 1)[0][1], take(source, 1, seed=1)[0][1]))


class BadInputTest(absltest.TestCase):

  def test_undecodable_training_images_are_skipped_and_counted(self):
    with self.assertLogs(level="WARNING") as logs:
      source = real_mnist(corrupt_train_records=(3, 11))
    self.assertTrue(any("skipped 1 undecodable image(s) of" in line for line in logs.output))
    self.assertEqual(source.num_train, 18)
    self.assertLen(take(source, 4, batch=4), 4)

  def test_undecodable_images_of_uncached_imagenet_are_skipped_and_counted(self):
    jpeg = tf.io.encode_jpeg(tf.zeros([40, 30, 3], tf.uint8)).numpy()

    def as_dataset(self, split, decoders=None, read_config=None, **kwargs):
      del self, split, decoders, read_config, kwargs
      images = [jpeg] * 8
      images[2] = b"not an image"
      return tf.data.Dataset.from_tensor_slices(
          {"image": images, "label": np.arange(8), "file_name": ["f"] * 8})

    config = testing.tiny_config(dataset="imagenet2012", input_shards=1, tfds_download=True,
                                 data_dir=os.path.join(_tmp, "empty"))
    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
      source = experiment.load_dataset(experiment.resolve(config))
    with self.assertLogs(level="WARNING") as logs:
      batches = take(source, 2, batch=4)
    self.assertTrue(any("skipped 1 undecodable training image(s) (1 so far)" in line
                        for line in logs.output))
    self.assertEqual(batches[-1][2], [9])  # 8 images consumed, 9 records read
    self.assertNotIn(2, np.concatenate([b[1] for b in batches]))

  def test_unprepared_imagenet_says_where_the_archives_go(self):
    config = testing.tiny_config(dataset="imagenet2012", data_dir=os.path.join(_tmp, "none"))
    with self.assertRaisesRegex(UserError, r"imagenet2012 is not prepared in .*none: download "
                                r"ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar .* into "
                                r".*none/downloads/manual"):
      experiment.load_dataset(experiment.resolve(config))

  def test_an_unprepared_dataset_is_not_downloaded_when_told_not_to(self):
    config = testing.tiny_config(dataset="cifar10", data_dir=os.path.join(_tmp, "none"),
                                 tfds_download=False)
    with self.assertRaisesRegex(UserError, r"cifar10 is not prepared in .*none; on a machine "
                                r"with internet run `tfds build cifar10"):
      experiment.load_dataset(experiment.resolve(config))

  def test_ten_crops_need_imagenet_style_data(self):
    with self.assertRaisesRegex(UserError, "eval_crops = 10 is ImageNet-style evaluation"):
      mocked("cifar10", eval_crops=10)

  def test_shards_must_divide_the_batch(self):
    source = mocked("cifar10")
    with self.assertRaisesRegex(UserError, "batch 6 cannot be cut into 4 input shards"):
      take(source, 1, batch=6)


class EndToEndTest(absltest.TestCase):

  def config(self, name, steps, **overrides):
    return testing.tiny_config(dataset=name, input_shards=4, num_train_steps=steps,
                               global_batch_size=8, eval_batch_size=8, checkpoint_every_steps=3,
                               log_every_steps=3, eval_every_steps=100,
                               data_dir=os.path.join(_tmp, "empty"), **overrides)

  def test_mocked_cifar10_hybrid_resumes_exactly(self):
    settings = dict(parallelism="hybrid", mesh={"data": 2, "model": 2})
    with tfds.testing.mock_data(num_examples=MOCK_EXAMPLES), tempfile.TemporaryDirectory() as a, \
        tempfile.TemporaryDirectory() as b:
      straight = train.train_config(self.config("cifar10", 6, **settings), a)
      train.train_config(self.config("cifar10", 3, **settings), b)
      resumed = train.train_config(self.config("cifar10", 6, **settings), b)
      checkpoints = checkpointing.Checkpointer(os.path.join(b, "checkpoints"), 3, 3, {})
      position = checkpoints.manager.restore(6, args=checkpointing.ocp.args.Composite(
          meta=checkpointing.ocp.args.JsonRestore()))["meta"]["data_position"]
      checkpoints.close()
    self.assertEqual(position, [12, 12, 12, 12])  # 6 steps × 2 rows from each of 4 shards
    self.assertEqual(straight, resumed)
    self.assertTrue(math.isfinite(straight["eval_loss"]))

  def test_mocked_imagenet2012_with_ten_crop_evaluation(self):
    with tfds.testing.mock_data(num_examples=MOCK_EXAMPLES), tempfile.TemporaryDirectory() as w:
      metrics = train.train_config(self.config("imagenet2012", 2, eval_crops=10), w)
    # An all-but-untrained net on 1000 classes: the loss of a near-uniform prediction.
    self.assertBetween(metrics["eval_loss"], math.log(1000) - 0.5, math.log(1000) + 0.5)
    self.assertBetween(metrics["eval_top5"], 0.0, 1.0)


if __name__ == "__main__":
  absltest.main()
