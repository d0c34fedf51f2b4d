"""The decoded ImageNet path: prepare --format=decoded writes every image once, resumes without
duplicating, refuses a disk or device-memory shortfall in one sentence before any work; the set on
the devices (whole or split over "data") and on the host gives the JPEG path's pixels with the same
crops, flips and lighting, the same batches on any mesh and process split, and exact resumes."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

import jax
import numpy as np
from absl.testing import absltest
from jax.sharding import NamedSharding, PartitionSpec as P
from PIL import Image

import experiment
import input_pipeline
import train
from configs import default
from hybrid_parallel import models
from hybrid_parallel.errors import UserError
from input_pipeline import decoded, device_augment, imagenet_stats, prepare
from tests import testing

# The JPEG path (prepared:DIR) reads with Grain, ArrayRecord and simplejpeg, which the decoded
# path does not need: where they are missing, the sets are decoded from the JPEG files directly
# and the comparisons with the JPEG path are skipped.
WITHOUT_JPEG_PATH = next((f"needs {name}, not installed here" for name in
                          ("grain", "array_record", "simplejpeg")
                          if importlib.util.find_spec(name) is None), None)
needs_jpeg_path = unittest.skipIf(WITHOUT_JPEG_PATH, WITHOUT_JPEG_PATH)

STORED, CROP = 32, 24
CLASSES = 3
TRAIN, EVAL = 24, 6


def photographs():
  """The real photographs that ship with scikit-learn and matplotlib (uint8 RGB)."""
  import matplotlib
  import sklearn
  paths = [os.path.join(os.path.dirname(sklearn.__file__), "datasets", "images", name)
           for name in ("china.jpg", "flower.jpg")]
  paths.append(os.path.join(matplotlib.get_data_path(), "sample_data", "grace_hopper.jpg"))
  return [np.asarray(Image.open(p).convert("RGB")) for p in paths]


def make_photo_folder(root: str) -> str:
  """train/ and val/ of real JPEG files (q90, PIL's default 4:2:0 chroma): windows of the
  photographs at assorted shapes, one broken file among the training images."""
  rng = np.random.default_rng(0)
  photos = photographs()
  for split, count in (("train", TRAIN), ("val", EVAL)):
    for i in range(count):
      photo = photos[i % len(photos)]
      height, width = photo.shape[:2]
      h, w = rng.integers(height // 3, height // 2), rng.integers(width // 3, width // 2)
      top, left = rng.integers(0, height - h), rng.integers(0, width - w)
      size = (int(rng.integers(40, 80)), int(rng.integers(40, 80)))
      folder = os.path.join(root, split, f"class_{i % CLASSES}")
      os.makedirs(folder, exist_ok=True)
      Image.fromarray(photo[top:top + h, left:left + w]).resize(size, Image.BILINEAR).save(
          os.path.join(folder, f"{i:03d}.jpg"), quality=90)
  with open(os.path.join(root, "train", "class_1", "broken.jpg"), "wb") as f:
    f.write(b"\xff\xd8 no more of a JPEG than this")
  return root


MODEL_SIZED = 72  # a stored side for the tiny models' 64² crops


def model_sized_sets(root: str, *, jpeg: bool = True) -> tuple[str, str]:
  """(the JPEG preparation, the decoded YUV set) of a folder of real JPEGs at MODEL_SIZED²; the
  JPEG one only where asked for and its readers are here."""
  folder = make_photo_folder(os.path.join(root, "photos"))
  jpegs, yuv = os.path.join(root, "jpeg"), os.path.join(root, "yuv")
  if jpeg and not WITHOUT_JPEG_PATH:
    prepare.prepare(f"folder:{folder}", jpegs, size=MODEL_SIZED, images_per_shard=10)
  prepare.prepare(f"folder:{folder}", yuv, image_format="decoded", size=MODEL_SIZED)
  return jpegs, yuv


def mesh_sharding(devices: int):
  return NamedSharding(jax.make_mesh((devices,), ("data",), devices=jax.devices()[:devices]),
                       P("data"))


def finished_batches(source, sharding, *, position: int, steps: int, batch: int = 8,
                     seed: int = 0, finish=None):
  """The augmented float32 global batches of `steps` steps from `position` (train_iterator's,
  finished by the source's device_input as the step finishes them; by `finish`, that
  device_input made already, where given: its program then compiles once for many calls)."""
  finish = finish or source.device_input(sharding, seed=seed)
  batches = input_pipeline.train_iterator(source, sharding, batch, seed=seed, position=position)
  try:
    return [(np.asarray(finish.finish_train(inputs, next_position - 1)), np.asarray(labels),
             next_position)
            for inputs, labels, next_position in (next(batches) for _ in range(steps))]
  finally:
    batches.close()


def finished_eval_batches(source, sharding, batch: int):
  """The evaluation batches, finished as the eval step finishes them."""
  finish = source.device_input(sharding, seed=0, place=False)
  return [(np.asarray(finish.finish_eval(inputs)), np.asarray(labels), np.asarray(weights))
          for inputs, labels, weights in input_pipeline.eval_batches(source, sharding, batch)]


class DecodedTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.folder = make_photo_folder(os.path.join(cls.tmp, "photos"))
    # The JPEG path's preparation, and decoded sets made from its stored JPEGs (or, without the
    # JPEG path's readers, from the JPEG files).
    cls.jpegs = os.path.join(cls.tmp, "jpeg")
    source = f"folder:{cls.folder}"
    if not WITHOUT_JPEG_PATH:
      prepare.prepare(source, cls.jpegs, size=STORED, images_per_shard=10)
      source = f"prepared:{cls.jpegs}"
    cls.rgb = os.path.join(cls.tmp, "rgb")
    cls.yuv = os.path.join(cls.tmp, "yuv")
    prepare.prepare(source, cls.rgb, image_format="decoded", colour="rgb", size=STORED)
    prepare.prepare(source, cls.yuv, image_format="decoded", colour="yuv420", size=STORED,
                    workers=2)

  def jpeg_source(self):
    return input_pipeline.load(f"prepared:{self.jpegs}", image_size=CROP, input_workers=0)

  def decoded_source(self, directory, where=decoded.HOST, *, data=1, **kwargs):
    """The decoded set in `directory`, placed `where` on a mesh of `data` data shards."""
    return decoded.DecodedDataset(directory, image_size=CROP, **kwargs).placed(
        decoded.Placement(where, data, "as the test places it"))

  def test_the_files_hold_every_decodable_image_once_and_name_the_broken_one(self):
    folder_set = os.path.join(self.tmp, "from_folder")
    manifest = prepare.prepare(f"folder:{self.folder}", folder_set, image_format="decoded",
                               colour="rgb", size=STORED)
    self.assertEqual(manifest.examples, {"train": TRAIN, "eval": EVAL})
    self.assertEqual([os.path.basename(i) for i in manifest.skipped["train"]], ["broken.jpg"])
    self.assertEqual(manifest.bytes_per_image, STORED * STORED * 3)
    self.assertEqual(os.path.getsize(os.path.join(folder_set, "train.images")),
                     TRAIN * STORED * STORED * 3)
    # Row r is the r-th decodable file's Krizhevsky crop, with its class.
    files = sorted((c, f) for c in os.listdir(os.path.join(self.folder, "train"))
                   for f in os.listdir(os.path.join(self.folder, "train", c)) if f != "broken.jpg")
    rows = manifest.images(folder_set, "train")
    labels = manifest.labels(folder_set, "train")
    for r, (cls, name) in enumerate(files):
      with open(os.path.join(self.folder, "train", cls, name), "rb") as f:
        expected = prepare.krizhevsky_crop(f.read(), STORED)
      np.testing.assert_array_equal(rows[r].reshape(STORED, STORED, 3), expected)
      self.assertEqual(labels[r], int(cls[-1]))
    yuv = decoded.Manifest.read(self.yuv)
    self.assertEqual(yuv.bytes_per_image, STORED * STORED * 3 // 2)  # half RGB's bytes

  @needs_jpeg_path
  def test_rgb_on_the_devices_equals_the_jpeg_path_with_the_same_draws(self):
    # The JPEG path decodes its stored JPEGs every epoch; the decoded set decoded them once, with
    # the same decoder (libjpeg-turbo, its default DCT and upsampling): the same uint8 pixels, so
    # the same crops, flips and lighting give the same float32 values, bit for bit.
    sharding = mesh_sharding(2)
    jpeg = finished_batches(self.jpeg_source(), sharding, position=1, steps=3)
    for where in (decoded.WHOLE, decoded.SPLIT, decoded.HOST):
      source = self.decoded_source(self.rgb, where, data=2)
      ours = finished_batches(source, sharding, position=1, steps=3)
      for (images, labels, position), (want, want_labels, want_position) in zip(ours, jpeg):
        np.testing.assert_array_equal(images, want, err_msg=where)
        np.testing.assert_array_equal(labels, want_labels)
        self.assertEqual(position, want_position)

  @unittest.skipIf(importlib.util.find_spec("simplejpeg") is None, "needs simplejpeg")
  def test_yuv420_rows_decode_as_libjpeg_turbo_decodes_a_jpeg_of_them(self):
    # A JPEG of quality 100 whose planes are constant over each 8×8 block keeps them exactly (a
    # block's one DCT coefficient is an integer), so libjpeg-turbo's RGB decode of it (simplejpeg:
    # its default fancy upsampling and integer colour conversion) is what the same planes as a
    # row must give: equal, bit for bit, across the blocks' edges and the image's. A window at any
    # offset is the whole image's, cut there.
    import simplejpeg
    rng = np.random.default_rng(0)
    half = STORED // 2
    blocks = lambda side: np.kron(rng.integers(0, 256, (side // 8, side // 8)),
                                  np.ones((8, 8))).astype(np.uint8)
    whole = jax.jit(lambda row, top, left: decoded.row_window(row, top, left, size=CROP,
                                                              colour="yuv420", stored=STORED))
    for _ in range(4):
      luma, cb, cr = blocks(STORED), blocks(half), blocks(half)
      libjpeg = simplejpeg.decode_jpeg(simplejpeg.encode_jpeg_yuv_planes(luma, cb, cr,
                                                                         quality=100))
      row = np.concatenate([luma.ravel(), cb.ravel(), cr.ravel()])
      np.testing.assert_array_equal(decoded.rows_to_rgb(row[None], colour="yuv420",
                                                        size=STORED)[0], libjpeg)
      for top, left in ((0, 0), (8, 8), (3, 5), (1, 8)):
        np.testing.assert_array_equal(np.asarray(whole(row, top, left)),
                                      libjpeg[top:top + CROP, left:left + CROP])

  def test_yuv420_on_the_devices_is_its_rows_decoded_then_augmented(self):
    # The step cuts each crop's window from the YUV row and converts only that; the same crops,
    # flips and lighting of the rows converted whole, on the host, give the same bits.
    source = self.decoded_source(self.yuv, decoded.WHOLE)
    rows = np.arange(8, dtype=np.int32) + 5
    sharding = mesh_sharding(4)
    ours = np.asarray(source.device_input(sharding, seed=3).finish_train(
        jax.device_put(rows, sharding), 7))
    converted = decoded.rows_to_rgb(np.asarray(source.manifest.images(self.yuv, "train"))[rows],
                                    colour="yuv420", size=STORED)
    train, _ = device_augment.finishes(sharding, seed=3, image_size=CROP,
                                       stored=(STORED, STORED), pca_stddev=0.1,
                                       mean=source.mean, std=source.std)
    np.testing.assert_array_equal(
        ours, np.asarray(jax.jit(train)(jax.device_put(converted, sharding), 7)))

  def test_the_batches_are_the_same_on_any_mesh_and_process_split_and_resume_exactly(self):
    whole = finished_batches(self.decoded_source(self.yuv, decoded.WHOLE),
                             mesh_sharding(1), position=0, steps=5)  # 3 steps an epoch
    for devices, where in ((8, decoded.WHOLE), (8, decoded.SPLIT), (2, decoded.SPLIT)):
      source = self.decoded_source(self.yuv, where, data=devices)
      # One device_input for every start: each start is a new stream of batches from there,
      # finished by the same program (a function of the rows and the step only).
      finish = source.device_input(mesh_sharding(devices), seed=0)
      for start in (0, 2, 3, 4):  # before, at and after the epoch boundary
        resumed = finished_batches(source, mesh_sharding(devices), position=start,
                                   steps=5 - start, finish=finish)
        for (images, labels, position), (want, want_labels, want_position) in zip(
            resumed, whole[start:]):
          # The same pixels, crops, flips and lighting draws; the float32 arithmetic of the
          # lighting and normalisation may round 1 ulp apart where a device holds another number
          # of rows (XLA:CPU's vector loop fuses a·b + c into one FMA, its scalar remainder does
          # not; seen under JAX 0.10.2): values lie in [-2.2, 2.7], an ulp there ≤ 2⁻²², allow 2.
          np.testing.assert_allclose(images, want, rtol=0, atol=2 * 2**-22,
                                     err_msg=f"{devices} {where} {start}")
          np.testing.assert_array_equal(labels, want_labels)
          self.assertEqual(position, want_position)
    # Each of two processes sends its rows of every batch: the slices of one process's.
    source = self.decoded_source(self.yuv)
    one = source.train_batches(8, seed=0, position=0, shard=slice(0, 8))
    halves = [source.train_batches(8, seed=0, position=0, shard=s)
              for s in (slice(0, 4), slice(4, 8))]
    for _ in range(4):
      images, labels, _ = next(one)
      parts = [next(h) for h in halves]
      np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), images)
      np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), labels)
    for stream in (one, *halves):
      stream.close()

  @needs_jpeg_path
  def test_evaluation_reads_every_image_once_then_weight_zero_padding(self):
    sharding = mesh_sharding(2)
    jpeg = finished_eval_batches(self.jpeg_source(), sharding, 4)
    ours = finished_eval_batches(self.decoded_source(self.rgb), sharding, 4)
    self.assertLen(ours, 2)  # 6 images in batches of 4
    for batch, want in zip(ours, jpeg):
      for got, expected in zip(batch, want):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))

  def test_a_stopped_preparation_resumes_without_duplicating(self):
    straight = os.path.join(self.tmp, "straight")
    prepare.prepare(f"folder:{self.folder}", straight, image_format="decoded", size=STORED)
    stopped = os.path.join(self.tmp, "stopped")
    data = prepare.open_input(f"folder:{self.folder}", None)

    class Stop(Exception):
      pass

    def stop_after(count):
      def decode_many(items):
        for i, item in enumerate(items):
          if i == count:
            raise Stop
          yield prepare.decode_to_row(item, STORED, "yuv420")
      return decode_many

    # Stopped at the 13th image, after a progress record at 8: rows 8..11 are on disk, unrecorded.
    with self.assertRaises(Stop):
      decoded.prepare(data, stopped, source=f"folder:{self.folder}", colour="yuv420",
                      size=STORED, encode_many=stop_after(12), checkpoint_images=8)
    with self.assertRaisesRegex(UserError, "did not finish.*again to complete it"):
      decoded.Manifest.read(stopped)
    again = prepare.prepare(f"folder:{self.folder}", stopped, image_format="decoded",
                            size=STORED)
    self.assertEqual(again, decoded.Manifest.read(straight))
    for name in ("train.images", "train.labels", "eval.images", "eval.labels"):
      with open(os.path.join(stopped, name), "rb") as a, open(os.path.join(straight, name),
                                                               "rb") as b:
        self.assertEqual(a.read(), b.read(), name)
    self.assertEqual(sorted(os.listdir(stopped)), sorted(os.listdir(straight)))
    with self.assertRaisesRegex(UserError, "already holds a decoded preparation made with"):
      prepare.prepare(f"folder:{self.folder}", stopped, image_format="decoded", colour="rgb",
                      size=STORED)

  def test_a_disk_shortfall_is_refused_before_anything_is_written(self):
    out = os.path.join(self.tmp, "too_small")
    needed = (TRAIN + 1 + EVAL) * (STORED * STORED * 3 + 4)  # the broken file is counted too
    with self.assertRaises(UserError) as raised:
      prepare.prepare(f"folder:{self.folder}", out, image_format="decoded", colour="rgb",
                      size=STORED, free_disk=needed - 1)
    message = str(raised.exception)
    # Sizes under a tenth of a GB in kB, not "0.0 GB" (needed: 31 × 3,076 bytes = 95.4 kB).
    self.assertEqual(message, f"--out {out!r} needs 95.4 kB more for 31 images of 3,072 bytes "
                              f"(rgb, 32²) and its disk has 95.4 kB free; free space or prepare "
                              f"elsewhere (or with --colour=yuv420, half the bytes).")
    self.assertFalse(os.path.exists(out))
    prepare.prepare(f"folder:{self.folder}", out, image_format="decoded", colour="rgb",
                    size=STORED, free_disk=needed)  # exactly enough is enough

  def test_the_placement_follows_the_memory_and_a_shortfall_is_one_sentence(self):
    source = decoded.DecodedDataset(self.yuv, image_size=CROP, placement="devices")
    set_bytes = TRAIN * STORED * STORED * 3 // 2
    share = -(-TRAIN // 2) * STORED * STORED * 3 // 2

    def where(asked, budget, platform="gpu"):
      source.asked = asked
      return source.decide(data=2, platform=platform, budget=budget).where

    # 24 rows of 1,536 bytes: 36.9 kB, 18.4 kB a share, a budget a byte short of it.
    with self.assertRaisesRegex(UserError, r"^decoded_placement 'devices': the 36\.9 kB training "
                                r"set of .* \(18\.4 kB per device split over the mesh's 2 data "
                                r"shards\) does not fit in the 18\.4 kB each device has for it; "
                                r"use decoded_placement = 'host' or 'auto'"):
      where("devices", share - 1)
    # A budget the set fits exactly is enough; a share, split; less, host under auto.
    self.assertEqual([where("devices", set_bytes), where("devices", share),
                      where("split", set_bytes), where("auto", share - 1),
                      where("auto", set_bytes, platform="cpu"), where("host", set_bytes)],
                     [decoded.WHOLE, decoded.SPLIT, decoded.SPLIT, decoded.HOST, decoded.HOST,
                      decoded.HOST])
    # Devices that report no memory statistics: auto reads on the host, saying why; asked onto
    # the devices, it goes there unchecked.
    source.asked = "auto"
    unknown = source.decide(data=2, platform="gpu", budget=None)
    self.assertEqual((unknown.where, unknown.why),
                     (decoded.HOST, "the GPU devices report no memory statistics, so whether "
                                    "the set fits cannot be known; 'auto' reads it on the host"))
    self.assertEqual(where("devices", None), decoded.SPLIT)
    # 'split' on a mesh without a data axis to split over: refused whatever the memory, as such
    # (not as a set that "does not fit").
    source.asked = "split"
    for budget in (set_bytes, None):
      with self.assertRaisesRegex(UserError, r"^decoded_placement 'split' shares the set's rows "
                                  r"over the mesh's data axis, and this mesh has 1 data shard: "
                                  r"use decoded_placement = 'devices'"):
        source.decide(data=1, platform="gpu", budget=budget)

  def test_the_config_names_a_decoded_set_and_bad_values_get_one_sentence(self):
    config = default.get_config()
    config.update(dataset=f"decoded:{self.yuv}", model="alexnet_owt_tiny",
                  decoded_placement="host", global_batch_size=8)
    spec = experiment.resolve(config)
    # The size it advises is even (YUV 4:2:0 halves it): 64 × 256/224 = 73.1, so 74.
    with self.assertRaisesRegex(UserError, r"image_size 64 is larger than the 32² images .*; "
                                r"prepare them with --size=74 or train at most at 32\.$"):
      experiment.load_dataset(spec)  # the default 64 does not fit these 32² images
    source = input_pipeline.load(f"decoded:{self.yuv}", image_size=CROP,
                                 decoded_placement=spec.data.decoded_placement)
    self.assertEqual((source.asked, source.num_train, source.num_classes),
                     ("host", TRAIN, CLASSES))
    config.decoded_placement = "gpu"
    with self.assertRaisesRegex(UserError, "decoded_placement"):
      experiment.resolve(config)
    for name, message in (("decoded:", "names no directory; write decoded:DIR"),
                          (f"decoded:{self.folder}", "is not a decoded dataset"),
                          (f"decoded:{self.tmp}/nowhere", "does not exist; make it with")):
      with self.assertRaisesRegex(UserError, message):
        input_pipeline.load(name, image_size=CROP)
    with self.assertRaisesRegex(UserError, "larger than the 32² images decoded"):
      input_pipeline.load(f"decoded:{self.yuv}", image_size=40)
    # A manifest of another version (an unknown field) is one sentence, not a TypeError.
    stale = os.path.join(self.tmp, "stale")
    shutil.copytree(self.yuv, stale)
    with open(os.path.join(stale, decoded.MANIFEST)) as f:
      fields = json.load(f)
    with open(os.path.join(stale, decoded.MANIFEST), "w") as f:
      json.dump({**fields, "field_of_another_version": 1}, f)
    with self.assertRaisesRegex(UserError, "is not a manifest this version can read"):
      input_pipeline.load(f"decoded:{stale}", image_size=CROP)
    with self.assertRaisesRegex(UserError, "--size 33 is odd"):
      prepare.prepare(f"folder:{self.folder}", os.path.join(self.tmp, "odd"),
                      image_format="decoded", size=33)


def fewer_copy(directory: str, out: str, *, rows: int) -> str:
  """A copy of the decoded set in `directory` at `out` with its first `rows` training images
  only."""
  shutil.copytree(directory, out)
  manifest = decoded.Manifest.read(out)
  with open(os.path.join(out, decoded.MANIFEST)) as f:
    fields = json.load(f)
  fields["examples"]["train"] = rows
  with open(os.path.join(out, decoded.MANIFEST), "w") as f:
    json.dump(fields, f)
  os.truncate(os.path.join(out, "train.images"), rows * manifest.bytes_per_image)
  os.truncate(os.path.join(out, "train.labels"), rows * 4)
  return out


class CompileOnceTest(absltest.TestCase):
  """Training and evaluation compile once: after the first evaluation of a run, nothing is traced,
  lowered or compiled again — for the JPEG path, the decoded set (on the host and on the
  devices) made from a folder of real JPEGs, and the in-memory digits."""
  SIZE = MODEL_SIZED

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.jpegs, cls.yuv = model_sized_sets(cls.tmp)

  def compiles_after_the_first_evaluation(self, **fields) -> list[str]:
    """The compile events (train._COMPILE_EVENTS) of a 3-step run evaluated after every step,
    from the end of its first evaluation on."""
    config = default.get_config()
    config.update(model="alexnet_owt_tiny", image_size=64, global_batch_size=8,
                  eval_batch_size=4, num_train_steps=3, log_every_steps=1, eval_every_steps=1,
                  **fields)
    heard, evaluated = [], []
    listen = lambda event, start, end, **_: heard.append((start, event))
    real_evaluate = train.evaluate

    def evaluate(*args, **kwargs):  # train.py's own evaluation, with its end noted.
      metrics = real_evaluate(*args, **kwargs)
      evaluated.append(time.time())
      return metrics

    jax.monitoring.register_event_time_span_listener(listen)
    try:
      with tempfile.TemporaryDirectory() as workdir, \
          mock.patch.object(train, "evaluate", evaluate):
        train.train_config(config, workdir)
    finally:
      jax.monitoring.unregister_event_time_span_listener(listen)
    self.assertLen(evaluated, 3)
    return [event for start, event in heard
            if event in train._COMPILE_EVENTS and start > evaluated[0]]

  def test_the_placement_is_decided_from_the_compiled_steps_memory_before_any_work(self):
    config = default.get_config()
    config.update(dataset=f"decoded:{self.yuv}", model="alexnet_owt_tiny", image_size=64,
                  global_batch_size=8, decoded_placement="devices", parallelism="data")
    config.mesh.data = 2
    spec = experiment.resolve(config)
    run = experiment.build(spec, num_classes=CLASSES, channels=3, steps_per_epoch=1,
                           total_steps=1, devices=jax.devices()[:2], abstract=True)
    source = experiment.load_dataset(spec)
    set_bytes = TRAIN * self.SIZE**2 * 3 // 2
    whole = source.placed(decoded.Placement(decoded.WHOLE, 2, "as the test places it"))
    step = experiment.step_memory_bytes(spec, run, whole)
    # The compiled step holds at least its state (the parameters and their momentum, float32)
    # and the images it gathers from the set: each device its 4 of the batch's 8, float32.
    params = models.count_params(run.scheme.state.params)
    self.assertGreater(step, 2 * 4 * params + 4 * 4 * 64 * 64 * 3)
    # ... and not the set's bytes: the step is weighed alike beside a set of half the rows.
    half = fewer_copy(self.yuv, os.path.join(self.tmp, "half"), rows=TRAIN // 2)
    half_config = config.copy_and_resolve_references()
    half_config.dataset = f"decoded:{half}"
    half_spec = experiment.resolve(half_config)
    self.assertEqual(experiment.step_memory_bytes(half_spec, run, experiment.load_dataset(
        half_spec).placed(decoded.Placement(decoded.WHOLE, 2, "as the test places it"))), step)
    # CPU devices give a set half the host's available memory, split over them (two here).
    for room, where in ((step + set_bytes, decoded.WHOLE),  # the set and the step fit
                        (step + set_bytes - 1, decoded.SPLIT)):  # the step's bytes are kept
      with mock.patch.object(decoded, "available_memory_bytes", return_value=2 * 2 * room):
        self.assertEqual(experiment.feed(spec, run, source)[0].placement.where, where)
    # XLA:TPU refuses to compile a program whose arguments exceed the memory (a CPU never
    # does, so the refusal is raised here as XLA words it): a whole copy refused so is not
    # chosen; the split set is weighed and trained with.
    real_weigh = experiment._weigh

    def weigh(spec, run, source):
      if source.placement.where == decoded.WHOLE:
        raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
                                         "Ran out of memory in memory space hbm.")
      return real_weigh(spec, run, source)

    with mock.patch.object(decoded, "available_memory_bytes",
                           return_value=2 * 2 * (step + set_bytes)), \
        mock.patch.object(experiment, "_weigh", weigh):
      placed, steps = experiment.feed(spec, run, source)
    self.assertEqual((placed.placement.where, steps.weighed), (decoded.SPLIT, True))
    # Both refused: the set asked onto the devices fits nowhere there. Each process compiles
    # on its own, so the refusal is said only after every process has agreed the budget (a
    # process that said it alone would leave the others waiting in the agreement).
    agreed, real_agree = [], input_pipeline.agreed_minimum

    def agree(value):
      agreed.append(value)
      return real_agree(value)

    refuse_all = mock.Mock(side_effect=jax.errors.JaxRuntimeError(
        "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
        "space hbm."))
    with mock.patch.object(decoded, "available_memory_bytes",
                           return_value=2 * 2 * (step + set_bytes)), \
        mock.patch.object(experiment, "_weigh", refuse_all), \
        mock.patch.object(input_pipeline, "agreed_minimum", agree), \
        self.assertRaisesRegex(UserError, r"decoded_placement 'devices': .* does not fit"):
      experiment.feed(spec, run, source)
    self.assertEqual(refuse_all.call_count, 2)  # whole, then split
    self.assertEqual(agreed, [step + set_bytes, whole.share_bytes(2) - 1])

  def test_a_finished_run_started_again_weighs_and_compiles_no_train_step(self):
    config = default.get_config()
    config.update(dataset=f"decoded:{self.yuv}", decoded_placement="devices",
                  model="alexnet_owt_tiny", image_size=64, global_batch_size=8,
                  eval_batch_size=4, num_train_steps=1)
    with tempfile.TemporaryDirectory() as workdir:
      train.train_config(config, workdir)
      with testing.compiled_programs() as compiled:
        train.train_config(config, workdir)  # finished: evaluated, not trained
    self.assertIn("jit(per_device_eval)", compiled)  # (compiled, or read from the cache)
    self.assertNotIn("jit(train_step)", compiled)

  def test_nothing_compiles_after_the_first_evaluation(self):
    sources = {"digits": dict(dataset="digits"),
               "decoded, host": dict(dataset=f"decoded:{self.yuv}", decoded_placement="host"),
               "decoded, devices": dict(dataset=f"decoded:{self.yuv}",
                                        decoded_placement="devices")}
    if not WITHOUT_JPEG_PATH:
      sources["jpeg"] = dict(dataset=f"prepared:{self.jpegs}")
    for name, fields in sources.items():
      self.assertEqual(self.compiles_after_the_first_evaluation(**fields), [], name)


# Each of two processes (jax.distributed on localhost, one CPU device each) reads its own memory
# (a different amount each, as two hosts would) or its own files, and asks experiment.feed where
# the set goes; it prints the answer. It asks once for each pair of directories it is given
# (its own the first or the second of each pair), in one job: one start of the processes serves
# every question.
_LOAD_IN_A_PROCESS = """
import json, sys
from unittest import mock
import jax
process, port, pairs = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2,
                           process_id=process)
import experiment
from configs import default
from hybrid_parallel.errors import UserError
from input_pipeline import decoded
for directory in pairs[process::2]:
  config = default.get_config()
  config.update(dataset=f"decoded:{directory}", model="alexnet_owt_tiny", image_size=64,
                global_batch_size=8, decoded_placement="devices", parallelism="data")
  config.mesh.data = 2
  spec = experiment.resolve(config, processes=2)
  try:
    source = experiment.load_dataset(spec)
  except UserError as e:
    print(json.dumps(f"error: {e}"))
    continue
  run = experiment.build(spec, num_classes=3, channels=3, steps_per_epoch=1, total_steps=1,
                         abstract=True)
  whole = source.placed(decoded.Placement(decoded.WHOLE, 2, "as the test places it"))
  step = experiment.step_memory_bytes(spec, run, whole)
  # Process 0 has room for the whole set beside the step; process 1 for its share only.
  room = step + (source.set_bytes if process == 0 else source.rows_per_device(2) *
                 source.manifest.bytes_per_image)
  with mock.patch.object(decoded, "available_memory_bytes", return_value=2 * room):
    print(json.dumps(experiment.feed(spec, run, source)[0].placement.where))
"""


class ProcessesTest(absltest.TestCase):
  """What each of two processes reads from its own devices or files, they agree on before
  deciding anything: real processes on localhost."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    _, cls.yuv = model_sized_sets(cls.tmp, jpeg=False)

  def load_in_two_processes(self, *pairs) -> list[list]:
    """Each process's answers, one per pair of directories (process 0's, process 1's)."""
    from tests.faults_test import ROOT, free_port
    port = str(free_port())
    directories = [directory for pair in pairs for directory in pair]
    processes = [subprocess.Popen([sys.executable, "-c", _LOAD_IN_A_PROCESS, str(i), port,
                                   *directories], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for i in range(2)]
    answers = []
    for process in processes:
      stdout, stderr = process.communicate(timeout=300)
      self.assertEqual(process.returncode, 0, stderr[-3000:])
      answers.append([json.loads(line) for line in stdout.strip().splitlines()[-len(pairs):]])
    return [[mine[i] for mine in answers] for i in range(len(pairs))]

  def test_two_processes_place_the_set_alike_and_refuse_different_copies(self):
    # Both questions to one job of two processes, one after the other.
    fewer = fewer_copy(self.yuv, os.path.join(self.tmp, "fewer"), rows=12)
    alike, different = self.load_in_two_processes((self.yuv, self.yuv), (self.yuv, fewer))
    # Alone, process 0 would hold the whole set and process 1 its share: they run one program,
    # so both split it (the smaller room decides).
    self.assertEqual(alike, [decoded.SPLIT] * 2)
    # A copy with fewer images on one host: each process stops with the same sentence.
    self.assertEqual(different,
                     [f"error: the processes read different copies of decoded:{directory}: "
                      f"num_train is {TRAIN} on process 0, 12 on process 1; give every process "
                      f"the same files." for directory in (self.yuv, fewer)])


if __name__ == "__main__":
  absltest.main()
