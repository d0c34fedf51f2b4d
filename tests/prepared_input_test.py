"""The prepared ImageNet path: prepare → read gives every image once per epoch, the same batches on
any process split and mesh, exact resumes; bad input gets one sentence; the on-device
augmentation crops a window, flips half, lights as Krizhevsky, and evaluates as the host does."""

import json
import os
import subprocess
import sys
import tempfile

import jax
import numpy as np
from absl.testing import absltest
from jax.sharding import NamedSharding, PartitionSpec as P

import input_pipeline
from hybrid_parallel.errors import UserError
from input_pipeline import device_augment, imagenet_stats, prepare, prepared
from tests import testing

testing.skip_module_without_prepared_packages(__name__)

from PIL import Image  # noqa: E402  (after the skip: the imagenet extra's)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSES = ("cat", "dog", "eel")
TRAIN_PER_CLASS, EVAL_PER_CLASS = 12, 4
NUM_TRAIN = len(CLASSES) * TRAIN_PER_CLASS  # 36, plus one broken file
STORED = 20  # the stored side; the model's crop is 16
STEP = 5  # image i is a solid colour with red 5·i (48 images): JPEG and resizing keep it within ±2


def colour_id(images_BHWC) -> np.ndarray:
  """The image ids of solid-colour images (their mean red over STEP)."""
  return np.rint(np.asarray(images_BHWC, np.float64)[..., 0].mean(axis=(1, 2)) / STEP).astype(int)


def make_folder(root: str) -> str:
  """train/CLASS and val/CLASS of solid-colour JPEGs of assorted shapes, ids 0.. in train, then
  eval; one train file that is no image."""
  image_id = 0
  for split, per_class in (("train", TRAIN_PER_CLASS), ("val", EVAL_PER_CLASS)):
    for label, name in enumerate(CLASSES):
      os.makedirs(os.path.join(root, split, name))
      for i in range(per_class):
        height, width = 24 + 5 * (i % 4), 40 - 3 * (i % 5)  # portrait and landscape, all ≥ 20
        pixels = np.zeros((height, width, 3), np.uint8)
        pixels[..., 0], pixels[..., 1], pixels[..., 2] = STEP * image_id, 40 * label, 128
        Image.fromarray(pixels).save(os.path.join(root, split, name, f"{i:02d}.jpg"), quality=95)
        image_id += 1
  with open(os.path.join(root, "train", "cat", "broken.jpg"), "wb") as f:
    f.write(b"these bytes are no JPEG")
  return root


def host_batches(source, batch, *, position, steps, shard=None, seed=0):
  stream = source.train_batches(batch, seed=seed, position=position,
                                shard=shard or slice(0, batch))
  try:
    return [next(stream) for _ in range(steps)]
  finally:
    stream.close()


class PreparedSourceTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.folder = make_folder(os.path.join(cls.tmp, "images"))
    cls.out = os.path.join(cls.tmp, "prepared")
    cls.manifest = prepare.prepare(f"folder:{cls.folder}", cls.out, size=STORED,
                                   images_per_shard=10)

  def source(self, **kwargs):
    return input_pipeline.load(f"prepared:{self.out}", image_size=16,
                               **{"input_workers": 0, **kwargs})

  def test_the_manifest_counts_what_was_written_and_the_broken_file(self):
    self.assertEqual(self.manifest.examples, {"train": NUM_TRAIN, "eval": 12})
    self.assertEqual(self.manifest.skipped, {"train": 1, "eval": 0})
    self.assertEqual(self.manifest.class_names, CLASSES)
    sidecars = [json.load(open(os.path.join(self.out, f + ".json")))
                for f in self.manifest.files["train"]]
    # 37 files in 4 shards of 9, 9, 9 and 10; broken.jpg sorts after cat's 00..11: the second.
    self.assertEqual([s["examples"] for s in sidecars], [9, 8, 9, 10])
    self.assertEqual([os.path.basename(i) for s in sidecars for i in s["skipped_ids"]],
                     ["broken.jpg"])

  def test_an_epoch_holds_every_image_once_with_its_label(self):
    source = self.source()
    epoch = host_batches(source, 12, position=0, steps=3)  # 36 // 12 steps per epoch
    ids = np.concatenate([colour_id(images) for images, _, _ in epoch])
    labels = np.concatenate([labels for _, labels, _ in epoch])
    self.assertEqual(sorted(ids), list(range(NUM_TRAIN)))
    np.testing.assert_array_equal(labels, ids // TRAIN_PER_CLASS)
    self.assertEqual([position for _, _, position in epoch], [1, 2, 3])
    self.assertEqual(epoch[0][0].shape, (12, STORED, STORED, 3))
    next_epoch = colour_id(host_batches(source, 12, position=3, steps=1)[0][0])
    self.assertFalse(np.array_equal(next_epoch, ids[:12]))  # reshuffled

  def test_process_rows_and_resumes_read_the_same_batches(self):
    source = self.source()
    whole = host_batches(source, 12, position=0, steps=5)  # crosses the epoch boundary at 3
    for rows in (slice(0, 6), slice(6, 12), slice(3, 9)):  # two processes; model axis across
      part = host_batches(source, 12, position=0, steps=5, shard=rows)
      for (images, labels, _), (part_images, part_labels, _) in zip(whole, part):
        np.testing.assert_array_equal(part_images, images[rows])
        np.testing.assert_array_equal(part_labels, labels[rows])
    for start in (2, 3, 4):  # before, at and after the epoch boundary
      resumed = host_batches(source, 12, position=start, steps=5 - start)
      for (images, _, position), (again, _, again_position) in zip(whole[start:], resumed):
        np.testing.assert_array_equal(again, images)
        self.assertEqual(again_position, position)

  def test_worker_processes_yield_the_batches_in_step_order(self):
    in_process = host_batches(self.source(), 12, position=2, steps=4)
    workers = host_batches(self.source(input_workers=2), 12, position=2, steps=4)
    for (images, labels, position), (w_images, w_labels, w_position) in zip(in_process, workers):
      np.testing.assert_array_equal(w_images, images)
      np.testing.assert_array_equal(w_labels, labels)
      self.assertEqual(w_position, position)

  def test_evaluation_reads_every_image_once_then_weight_zero_padding(self):
    source = self.source()
    batches = list(source.eval_batches(5, slice(0, 5)))
    self.assertLen(batches, 3)  # 12 images in batches of 5
    ids = np.concatenate([colour_id(images) for images, _, _ in batches])
    weights = np.concatenate([w for _, _, w in batches])
    np.testing.assert_array_equal(ids[:12], np.arange(NUM_TRAIN, NUM_TRAIN + 12))
    np.testing.assert_array_equal(weights, [1] * 12 + [0] * 3)

  def test_the_batches_finished_on_the_devices_resume_exactly(self):
    source = self.source(eval_crops=10)
    sharding = NamedSharding(jax.make_mesh((2,), ("data",), devices=jax.devices()[:2]), P("data"))

    finish = source.device_input(sharding, seed=0)

    def finished(position, steps):
      batches = input_pipeline.train_iterator(source, sharding, 12, seed=0, position=position)
      try:
        return [np.asarray(finish.finish_train(next(batches)[0], step))
                for step in range(position, position + steps)]
      finally:
        batches.close()

    whole, resumed = finished(0, 4), finished(2, 2)
    self.assertEqual(whole[0].shape, (12, 16, 16, 3))
    np.testing.assert_array_equal(resumed[0], whole[2])  # same images, same crops and flips
    np.testing.assert_array_equal(resumed[1], whole[3])
    inputs, _, weights = next(input_pipeline.eval_batches(source, sharding, 6))
    images = finish.finish_eval(inputs)
    self.assertEqual((images.shape, images.dtype), ((6, 10, 16, 16, 3), np.float32))
    np.testing.assert_array_equal(np.asarray(weights), np.ones(6))

  def test_a_resumed_preparation_rewrites_only_the_unfinished_shard(self):
    out = os.path.join(self.tmp, "resumed")
    prepare.prepare(f"folder:{self.folder}", out, size=STORED, images_per_shard=10)
    os.remove(os.path.join(out, prepared.MANIFEST))  # as if stopped before the end,
    unfinished = os.path.join(out, self.manifest.files["train"][2])
    os.replace(unfinished, unfinished + ".partial")  # inside shard 3 of train
    with self.assertRaisesRegex(UserError, "did not finish.*again to complete it"):
      input_pipeline.load(f"prepared:{out}", image_size=16)
    kept = {f: os.stat(os.path.join(out, f)).st_mtime_ns for f in os.listdir(out)
            if f.endswith(".array_record")}
    again = prepare.prepare(f"folder:{self.folder}", out, size=STORED, images_per_shard=10)
    self.assertEqual(again, self.manifest)  # the same files, counts and skips
    for f, mtime in kept.items():
      self.assertEqual(os.stat(os.path.join(out, f)).st_mtime_ns, mtime, f)
    self.assertFalse(os.path.exists(unfinished + ".partial"))
    with self.assertRaisesRegex(UserError, "already holds a preparation made with"):
      prepare.prepare(f"folder:{self.folder}", out, image_format="raw", size=STORED)

  @testing.needs_tensorflow
  def test_a_tfds_dataset_prepares_through_tfds_own_reader(self):
    import tensorflow_datasets as tfds
    out = os.path.join(self.tmp, "imagenette")
    with tfds.testing.mock_data(num_examples=7):  # tfds's random JPEGs, no download
      manifest = prepare.prepare("imagenette/320px-v2", out, size=STORED, images_per_shard=3)
    self.assertEqual((manifest.examples, manifest.num_classes), ({"train": 7, "eval": 7}, 10))
    self.assertEqual(manifest.files["train"], [prepared.shard_file("train", k, 3)
                                               for k in range(3)])
    source = input_pipeline.load(f"prepared:{out}", image_size=16, input_workers=0)
    images, labels, _ = host_batches(source, 7, position=0, steps=1)[0]
    self.assertEqual(images.shape, (7, STORED, STORED, 3))
    self.assertTrue(set(labels) <= set(range(10)))

  def test_bad_input_gets_one_sentence(self):
    missing = os.path.join(self.tmp, "nowhere")
    for name, message in ((f"prepared:{missing}", "does not exist; make it with"),
                          (f"prepared:{self.folder}", "is not a prepared dataset")):
      with self.assertRaisesRegex(UserError, message):
        input_pipeline.load(name, image_size=16)
    with self.assertRaisesRegex(UserError, "larger than the 20² images prepared"):
      input_pipeline.load(f"prepared:{self.out}", image_size=24)
    with self.assertRaisesRegex(UserError, "needs train/ and val/"):
      prepare.prepare(f"folder:{os.path.join(self.folder, 'train')}", missing)
    self.assertFalse(os.path.exists(missing))  # nothing made for an input that cannot be read

  def test_the_command_line_says_one_sentence_and_exits_non_zero(self):
    run = subprocess.run([sys.executable, "-m", "input_pipeline.prepare",
                          f"--source=folder:{os.path.join(self.tmp, 'nowhere')}",
                          f"--out={os.path.join(self.tmp, 'cli')}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    self.assertEqual(run.returncode, 1)
    self.assertEqual(run.stderr.strip().splitlines()[-1],
                     f"error: image folder {os.path.join(self.tmp, 'nowhere')!r} does not exist.")
    self.assertNotIn("Traceback", run.stderr)


def coordinate_images(count: int, size: int) -> np.ndarray:
  """uint8 images whose red is the row and green the column of each pixel; blue the image."""
  rows, cols = np.mgrid[0:size, 0:size]
  images = np.empty((count, size, size, 3), np.uint8)
  images[..., 0], images[..., 1] = rows, cols
  images[..., 2] = np.arange(count)[:, None, None]
  return images


class DeviceAugmentTest(absltest.TestCase):
  STORED, CROP = 24, 16

  def transform(self, devices, *, pca_stddev=0.0, seed=0):
    mesh = jax.make_mesh((len(devices),), ("data",), devices=devices)
    sharding = NamedSharding(mesh, P("data"))
    train, _ = device_augment.finishes(
        sharding, seed=seed, image_size=self.CROP, stored=(self.STORED, self.STORED),
        pca_stddev=pca_stddev, mean=(0, 0, 0), std=(1, 1, 1))
    train = jax.jit(train)
    return sharding, lambda images, step: train(images, np.int32(step))

  def test_each_crop_is_a_window_and_half_are_flipped(self):
    images = coordinate_images(512, self.STORED)
    sharding, augment = self.transform(jax.devices()[:8])
    out = np.asarray(augment(jax.device_put(images, sharding), 3))
    top, left = out[:, 0, 0, 0], out[:, 0, :, 1].min(axis=1)
    window = np.arange(self.CROP)
    np.testing.assert_array_equal(out[..., 0], (top[:, None] + window)[:, :, None]
                                  * np.ones(self.CROP))  # contiguous rows,
    flipped = out[:, 0, 0, 1] > out[:, 0, -1, 1]
    columns = np.where(flipped[:, None], window[::-1], window) + left[:, None]
    np.testing.assert_array_equal(out[:, 0, :, 1], columns)  # contiguous columns (or reversed),
    np.testing.assert_array_equal(out[..., 2], images[:, :self.CROP, :self.CROP, 2])  # own image
    self.assertBetween(flipped.mean(), 0.40, 0.60)  # 512 draws: σ 2.2%, so ±10% is 4.5 σ
    offsets = set(range(self.STORED - self.CROP + 1))
    self.assertEqual((set(top), set(left)), (offsets, offsets))  # every position reachable

  def test_the_draws_depend_on_the_row_and_step_not_on_the_mesh(self):
    images = coordinate_images(16, self.STORED)
    outs = []
    for devices in (jax.devices()[:1], jax.devices()[:8], jax.devices()[:2]):
      sharding, augment = self.transform(devices, pca_stddev=0.1)
      outs.append(np.asarray(augment(jax.device_put(images, sharding), 5)))
    np.testing.assert_array_equal(outs[1], outs[0])
    np.testing.assert_array_equal(outs[2], outs[0])
    sharding, augment = self.transform(jax.devices()[:1], pca_stddev=0.1)
    self.assertFalse(np.array_equal(np.asarray(augment(images, 6)), outs[0]))

  def test_each_device_augments_its_own_rows_without_a_collective(self):
    from hybrid_parallel.analysis import hlo_stats
    sharding, augment = self.transform(jax.devices()[:8], pca_stddev=0.1)
    images = jax.device_put(coordinate_images(16, self.STORED), sharding)
    self.assertEqual(augment(images, 2).sharding.spec[0], "data")  # rows stay where they were
    hlo = jax.jit(lambda x: augment(x, 2)).lower(images).compile().as_text()
    stats = hlo_stats.collective_stats(hlo, 8)
    self.assertEqual({kind: s.ops for kind, s in stats.items() if s.ops}, {})

  def test_lighting_adds_one_pca_shift_per_image_of_sigma_alpha(self):
    images = coordinate_images(2048, self.STORED)
    sharding, plain = self.transform(jax.devices()[:8])
    _, lit = self.transform(jax.devices()[:8], pca_stddev=0.1)
    on_devices = jax.device_put(images, sharding)
    shift = np.asarray(lit(on_devices, 1), np.float64) - np.asarray(plain(on_devices, 1))
    per_image = shift[:, 0, 0]
    np.testing.assert_allclose(shift, np.broadcast_to(per_image[:, None, None], shift.shape),
                               atol=1e-4)  # float32 sums of values ≤ 255: rounding ≤ 3e-5
    # shift = 255·V·(α∘λ): solve for α, whose σ is 0.1 (2,048 draws: the estimate is ±1.6%).
    alpha = np.linalg.solve(np.array(imagenet_stats.EIGVEC),
                            per_image.T / 255.0).T / np.array(imagenet_stats.EIGVAL)
    np.testing.assert_allclose(alpha.std(axis=0), [0.1] * 3, rtol=0.06)
    np.testing.assert_allclose(alpha.mean(axis=0), [0.0] * 3, atol=0.01)

  @testing.needs_tensorflow
  def test_evaluation_crops_equal_the_tensorflow_ones(self):
    import tensorflow as tf
    from input_pipeline import augment
    images = np.random.default_rng(0).integers(0, 256, (4, 23, 26, 3), np.uint8)
    mean, std = imagenet_stats.MEAN, imagenet_stats.STD
    sharding = NamedSharding(jax.make_mesh((2,), ("data",), devices=jax.devices()[:2]),
                             P("data"))
    for crops in (1, 10):
      _, evaluate = device_augment.finishes(sharding, seed=0, image_size=self.CROP,
                                            stored=images.shape[1:3], pca_stddev=0.0,
                                            mean=mean, std=std, crops=crops)
      on_device = jax.jit(evaluate)(jax.device_put(images, sharding))
      on_host = np.stack([augment.imagenet_eval(tf.constant(i), image_size=self.CROP,
                                                crops=crops, mean=mean, std=std).numpy()
                          for i in images])
      # The devices multiply by 1/σ where TensorFlow divides by σ: results lie in [-2.2, 2.7],
      # where a float32 ulp is at most 2⁻²²; allow 2.
      np.testing.assert_allclose(np.asarray(on_device), on_host, rtol=0, atol=2 * 2**-22)


if __name__ == "__main__":
  absltest.main()
