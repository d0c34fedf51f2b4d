r"""Images/s of the input pipelines alone (no model), per host core, and the trainer they feed.

  python -m benchmarks.speed.input_pipeline [--sections=tfds,prepare,prepared] [--images=768] \
      [--batches=30] [--out=DIR | --publish] [--under=gpu_host]
  python -m benchmarks.speed.input_pipeline --sections=decoded_prepare,decoded,feeding \
      --feeding_batches=32 --feeding_steps=40 --under=decoded     # the decoded path

Nothing is downloaded. The ImageNet-like images are real photographs (the three that ship with
scikit-learn and matplotlib), cut at random places and saved as JPEGs of quality 90 at a spread of
ImageNet's sizes (500×375 most often, then 375×500, 500×333, 500×500, 640×480, 800×600, 333×500),
in a folder of ten classes.

Sections:
  tfds      the TensorFlow path: imagenet2012 (those JPEGs through `tfds.testing.mock_data`:
            read, shuffled, decoded, shorter side to 256, crop 224, flip, lighting, normalised on
            the host, every epoch). tf.data uses every core, so per core is images/s ÷ cores.
            Needs TensorFlow.
  prepare   `python -m input_pipeline.prepare` of the folder, JPEG q90 and raw, on every core:
            images/s, bytes per image, and what that makes for ImageNet's 1,331,167 images.
  prepared  the prepared source read for a 224 model at global batch 256 (the host's work ends
            at uint8 256² — crop, flip, lighting and normalisation run on the devices, timed
            separately as `device_finish_images_per_sec`): on one thread (one core), on a thread
            per core (the default) and on a worker process per core (`input_workers`).
  trainer   main.py fed by the prepared JPEGs against the bare step at the same settings, in the
            same call (configs/imagenet_single.py's model in bfloat16; --trainer_batch).
  decoded_prepare
            `prepare --format=decoded` of the folder in each colour layout (yuv420, rgb): images/s
            per core (decode, crop and colour layout of each JPEG on one core, timed apart) and
            on every core, bytes per image, the colour conversion's share, YUV 4:2:0's PSNR
            against the RGB pixels, and what that makes for ImageNet's training set.
  decoded   the decoded set read for a 224 model at global batch 256: on the devices, the
            jitted gather + YUV→RGB + crop, flip, lighting, normalise of a batch of row numbers
            (`device_images_per_sec`, on the first device); on the host, batches gathered from
            the memory-mapped file on one thread and on a thread per core.
  feeding   main.py on configs/imagenet_single.py's model in bfloat16 at each --feeding_batches,
            fed by: synthetic data; the decoded set (YUV 4:2:0, --resident_images rows: the
            benchmark's decoded photographs repeated) on the devices and from host memory; the
            prepared JPEGs decoded in a worker process per core — each against the pipelined
            bare step and against main.py on synthetic data, in one call, with the device's busy
            share from a trace of a few steps; the JPEG row beside its ceiling (cores × one
            core's decode rate, measured in the same call).
--dry_run: tiny sizes.

Prints one JSON object and writes it as input_pipeline.json under runs/input_pipeline/ (or --out;
with --publish into docs/, which docs/input_pipeline.md's tables are made from; --dry_run writes
nothing unless --out or --publish is given):
`pipelines` rows hold `source` ("prepared" in the prepared ones), `images_per_sec_median` and
`images_per_sec_per_core`.
"""

import dataclasses
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time

import jax
import numpy as np
from absl import app, flags
from jax.sharding import NamedSharding, PartitionSpec as P

import benchmarks
import experiment
from benchmarks.common import main_runs, step_timing
from configs import default, imagenet_single
from hybrid_parallel import extras, models, platforms
from hybrid_parallel.analysis import costmodel
from input_pipeline import decoded, device_augment, prepare, prepared

ROOT = benchmarks.ROOT
SECTIONS = ("tfds", "prepare", "prepared", "trainer", "decoded_prepare", "decoded", "feeding")

_SECTIONS = benchmarks.define_choices("sections", SECTIONS, "Sections to run.",
                                      default=("tfds", "prepare", "prepared"))
_IMAGES = flags.DEFINE_integer("images", 768, "Benchmark JPEGs made (train; a tenth more eval).")
_BATCHES = flags.DEFINE_integer("batches", 30, "Timed global batches per source.")
_PHOTOS_DIR = flags.DEFINE_string(
    "photos_dir", None, "A folder of JPEG photographs to cut the benchmark images from (default: "
    "the ones scikit-learn and matplotlib install; for a host without those).")
_TRAINER_BATCH = flags.DEFINE_integer("trainer_batch", 256, "Global batch of the trainer rows.")
_TRAINER_STEPS = flags.DEFINE_integer("trainer_steps", 200, "main.py steps in the trainer rows.")
_FEEDING_BATCHES = flags.DEFINE_list("feeding_batches", ["256", "512"],
                                     "Global batches of the feeding rows.")
_FEEDING_STEPS = flags.DEFINE_integer("feeding_steps", 200, "main.py steps in the feeding rows.")
_FEEDING_MODEL = flags.DEFINE_string(
    "feeding_model", None, "The feeding rows' model and input side (default: "
    "configs/imagenet_single.py's, alexnet_owt at 224; a CPU may take alexnet_owt_tiny at 64).")
_FEEDING_IMAGE_SIZE = flags.DEFINE_integer("feeding_image_size", None, "See --feeding_model.")
_RESIDENT_IMAGES = flags.DEFINE_integer(
    "resident_images", 150_000, "Rows of the decoded set the feeding rows train on (a GPU "
    "host's 64 GiB disk holds 150,000 at 98 KB in YUV 4:2:0 with room for the rest).")
_BUDGET_S = flags.DEFINE_float("budget_s", 0, "Seconds the feeding rows may take (0: no limit); "
                               "a row that would start after it is recorded as skipped.")
_DRY_RUN = flags.DEFINE_boolean("dry_run", False, "Tiny sizes: checks the script, measures "
                                "nothing worth keeping (writes nothing unless --out or --publish is given).")
_OUTPUT = benchmarks.define_output_flags("input_pipeline")
_UNDER = flags.DEFINE_string("under", None, "Write the result under this key of the output's JSON, "
                             "keeping the rest (docs/input_pipeline.json's `gpu_host`: the "
                             "rows of a GPU machine's host beside this machine's).")

GLOBAL_BATCH = 256
IMAGENET_TRAIN = 1_281_167  # ILSVRC-2012's training images
IMAGENET_IMAGES = IMAGENET_TRAIN + 50_000  # train + validation
PHOTO_SIZES = ((500, 375),) * 4 + ((375, 500), (500, 333), (500, 500), (640, 480), (800, 600),
                                   (333, 500))
# A dry run's bare steps: the code path timed, not a figure worth the steps (a real run's are
# each call's own), and its CPU peak from a smaller GEMM (step_timing.measure's cpu_gemm_n).
DRY_STEPS = {"steps": 2, "warmup": 1}
DRY_CPU_GEMM_N = 1024
# Well-tuned convnets reach 15-20% MFU (NVIDIA's ResNet-50 examples: 2,470 images/s on an
# A100 with AMP, about 19%).
CONVNET_MFU = 0.15


def photographs(folder: str | None = None):
  """The JPEGs of `folder`, or the real photographs installed with scikit-learn and matplotlib,
  as uint8 RGB arrays."""
  if folder:
    paths = sorted(os.path.join(folder, f) for f in os.listdir(folder)
                   if f.lower().endswith((".jpg", ".jpeg")))
  else:
    # Found where they are installed, not imported: importing the two takes ~2.5 s of CPU.
    sklearn, matplotlib = (importlib.util.find_spec(name).submodule_search_locations[0]
                           for name in ("sklearn", "matplotlib"))
    paths = [os.path.join(sklearn, "datasets", "images", name)
             for name in ("china.jpg", "flower.jpg")]
    paths.append(os.path.join(matplotlib, "mpl-data", "sample_data", "grace_hopper.jpg"))
  from PIL import Image  # the imagenet extra (main() asks for it first).
  return [np.asarray(Image.open(p).convert("RGB")) for p in paths]


def make_jpegs(root: str, count: int, *, classes: int = 10,
               photos_dir: str | None = None) -> list[bytes]:
  """`count` train and count // 10 val JPEGs (q90) in root/{train,val}/CLASS, each a random
  window of a photograph resized to one of PHOTO_SIZES; returns the train JPEGs' bytes."""
  from PIL import Image  # the imagenet extra.
  rng = np.random.default_rng(0)
  photos = photographs(photos_dir)
  train = []
  for split, n in (("train", count), ("val", max(classes, count // 10))):
    for i in range(n):
      photo = photos[i % len(photos)]
      height, width = photo.shape[:2]
      h, w = rng.integers(height // 2, height + 1), rng.integers(width // 2, width + 1)
      top, left = rng.integers(0, height - h + 1), rng.integers(0, width - w + 1)
      size = PHOTO_SIZES[rng.integers(len(PHOTO_SIZES))]
      image = Image.fromarray(photo[top:top + h, left:left + w]).resize(size, Image.BILINEAR)
      folder = os.path.join(root, split, f"class_{i % classes:02d}")
      os.makedirs(folder, exist_ok=True)
      path = os.path.join(folder, f"{i:06d}.jpg")
      image.save(path, quality=90)
      if split == "train":
        with open(path, "rb") as f:
          train.append(f.read())
  return train


def _rate(source, batches: int, *, global_batch: int = GLOBAL_BATCH, window: int = 10) -> dict:
  """Images/s over `batches` global batches after 3 warm-up ones: the median of the rates of
  windows of `window` batches. (Per batch would mislead: batches made in parallel arrive in
  bursts — two threads hand over two at once — and a prefetch buffer holds some ready.)"""
  stream = source.train_batches(global_batch, seed=0,
                                position=source.position_at(0, global_batch),
                                shard=slice(0, global_batch))
  try:
    for _ in range(3):
      next(stream)
    rates = []
    for _ in range(max(1, batches // window)):
      start = time.perf_counter()
      for _ in range(window):
        next(stream)
      rates.append(window * global_batch / (time.perf_counter() - start))
  finally:
    close = getattr(stream, "close", None)
    if close:
      close()
  return {"images_per_sec_median": round(float(np.median(rates)), 1),
          "window_rates": [round(r, 1) for r in rates], "batches": window * len(rates)}


def tfds_row(jpegs: list[bytes], *, batches: int, examples: int) -> dict:
  """imagenet2012 through the real tfds code path (mock_data serving `jpegs`), on every core."""
  import tensorflow as tf
  import tensorflow_datasets as tfds
  config = default.get_config()
  config.dataset, config.image_size = "imagenet2012", 224
  config.data_dir = os.path.join(ROOT, "runs", "no_tfds_data")  # nothing is read from it

  def as_dataset(self, split, decoders=None, read_config=None, **kwargs):
    del self, split, decoders, read_config, kwargs
    return tf.data.Dataset.from_tensor_slices({
        "image": [jpegs[i % len(jpegs)] for i in range(examples)],
        "label": np.arange(examples) % 1000, "file_name": ["x.JPEG"] * examples})

  start = time.perf_counter()
  with tfds.testing.mock_data(as_dataset_fn=as_dataset):
    source = experiment.load_dataset(experiment.resolve(config))
  row = {"source": "tfds imagenet2012", "image_size": 224, "global_batch": GLOBAL_BATCH,
         "host_work": "decode, resize to 256, crop 224, flip, lighting, normalise",
         "cores": os.cpu_count(), "setup_s": round(time.perf_counter() - start, 1)}
  row.update(_rate(source, batches))
  row["images_per_sec_per_core"] = round(row["images_per_sec_median"] / row["cores"], 1)
  print(json.dumps(row), flush=True)
  return row


def prepare_rows(folder: str, out_root: str, jpegs: list[bytes], *,
                 formats: tuple[str, ...] = ("jpeg", "raw")) -> list[dict]:
  """Prepares `folder` in each of `formats` (JPEG q90, raw) on every core (wall time, bytes); the
  per-core rate — what ImageNet's core-hours follow from — is timed apart, on one core over
  `jpegs`: the whole run's rate also holds the worker pool's start, a large share of a run this
  small."""
  rows = []
  for image_format in formats:
    settings = prepare.Settings("timing", image_format, 90 if image_format == "jpeg" else 0, 256)
    start = time.perf_counter()
    for i, encoded in enumerate(jpegs):
      prepare.encode_example((i, encoded, 0), settings)
    per_core = len(jpegs) / (time.perf_counter() - start)
    out = os.path.join(out_root, image_format)
    start = time.perf_counter()
    manifest = prepare.prepare(f"folder:{folder}", out, image_format=image_format, quality=90,
                               workers=os.cpu_count(), images_per_shard=1024)
    seconds = time.perf_counter() - start
    written = sum(manifest.examples.values())
    disk = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    rate = written / seconds
    rows.append({
        "format": image_format, "quality": manifest.quality, "size": manifest.size,
        "images": written, "seconds": round(seconds, 1), "cores": os.cpu_count(),
        "images_per_sec": round(rate, 1), "images_per_sec_per_core": round(per_core, 1),
        "bytes_per_image": round(disk / written),
        "imagenet_gb": round(disk / written * IMAGENET_IMAGES / 1e9, 1),
        "imagenet_core_hours": round(IMAGENET_IMAGES / per_core / 3600, 2)})
    print(json.dumps(rows[-1]), flush=True)
  return rows


def prepared_rows(out_root: str, *, batches: int, image_size: int,
                  global_batch: int, only_one_core: bool = False) -> list[dict]:
  """The prepared formats read for an `image_size` model: in this process, then a worker per
  core; and the on-device finish (crop, flip, lighting, normalise) of a batch on this machine's
  first device. `only_one_core`: the JPEGs on one thread alone (the JPEG path's per-core rate)."""
  rows = []
  cores = os.cpu_count()
  for image_format in ("jpeg",) if only_one_core else ("jpeg", "raw"):
    # One core; then every core, as threads of this process or as worker processes.
    for workers, threads in ((0, 1),) if only_one_core else ((0, 1), (0, cores), (cores, 1)):
      source = prepared.PreparedDataset(os.path.join(out_root, image_format),
                                        image_size=image_size, workers=workers, threads=threads)
      quality = source.manifest.quality
      used = min(max(workers, 1) * threads, cores)
      row = {"source": f"prepared {image_format}" + (f" q{quality}" if quality else ""),
             "image_size": image_size, "stored_size": source.manifest.size,
             "global_batch": global_batch, "workers": workers, "threads": threads,
             "cores": used,
             "host_work": "decode, copy uint8" if image_format == "jpeg" else "copy uint8"}
      row.update(_rate(source, batches, global_batch=global_batch))
      row["images_per_sec_per_core"] = round(row["images_per_sec_median"] / used, 1)
      rows.append(row)
      print(json.dumps(row), flush=True)
  if not only_one_core:
    rows[-1]["device_finish_images_per_sec"] = device_finish_rate(source, global_batch)
  return rows


def device_finish_rate(source, global_batch: int) -> float:
  """Images/s of the on-device crop, flip, lighting and normalisation of a global batch."""
  device = jax.devices()[0]
  sharding = NamedSharding(jax.make_mesh((1,), ("data",), devices=[device]), P("data"))
  finish = source.device_input(sharding, seed=0)
  size = source.manifest.size
  images = jax.device_put(np.zeros((global_batch, size, size, 3), np.uint8), sharding)
  milliseconds = step_timing.median_ms(
      lambda: finish.finish_train(images, 0).block_until_ready(), 10)
  return round(global_batch / (milliseconds / 1e3), 1)


def trainer_rows(out_root: str, *, batch: int, steps: int, dry_run: bool) -> list[dict]:
  """main.py on the prepared JPEGs, then on the raw preparation (each read by a thread per core),
  then on the JPEGs decoded in a worker process per core, against the bare step of the same
  config, in this call."""
  config = imagenet_single.get_config()
  classes = prepared.Manifest.read(os.path.join(out_root, "jpeg")).num_classes
  model = "alexnet_owt_tiny" if dry_run else config.model
  image_size = 64 if dry_run else config.image_size
  config.update(model=model, image_size=image_size, dtype="bfloat16", global_batch_size=batch)
  step = step_timing.measure(config, num_classes=classes,
                             **(DRY_STEPS if dry_run else dict(steps=20, warmup=3)),
                             cpu_gemm_n=DRY_CPU_GEMM_N if dry_run else None)
  rows = []
  # Decoded on a thread per core (the default), then the JPEGs in a worker process per core.
  log_every = max(1, steps // 4)
  for image_format, workers in (("jpeg", 0), ("raw", 0), ("jpeg", os.cpu_count())):
    overrides = (f"--config.dataset=prepared:{os.path.join(out_root, image_format)}",
                 f"--config.input_workers={workers}",
                 f"--config.model={model}", f"--config.image_size={image_size}",
                 "--config.dtype=bfloat16", f"--config.global_batch_size={batch}",
                 f"--config.num_train_steps={steps}",
                 f"--config.log_every_steps={log_every}",
                 f"--config.eval_every_steps={steps}",
                 f"--config.checkpoint_every_steps={steps}", f"--config.eval_batch_size={batch}")
    with tempfile.TemporaryDirectory() as workdirs:
      run = main_runs.run_config("imagenet_single", workdirs, overrides=overrides,
                                 run_name=f"imagenet_single_{image_format}_{workers}",
                                 # Inside the first window: the median leaves it out anyway.
                                 profile_steps=min(20, log_every - 1))
    rows.append({
        "model": model, "dtype": "bfloat16", "batch": batch, "image_size": image_size,
        "source": f"prepared {image_format}" + (" q90" if image_format == "jpeg" else ""),
        "input_workers": workers,
        "classes": classes, **main_runs.against_step(run, step)})
    print(json.dumps(rows[-1]), flush=True)
  return rows


def decoded_prepare_rows(folder: str, out_root: str, jpegs: list[bytes]) -> list[dict]:
  """`prepare --format=decoded` of `folder` in each colour layout on every core; the per-core
  rate (decode, crop and layout of each of `jpegs` on one core) and the layout's own cost timed
  apart; YUV 4:2:0's PSNR against the RGB pixels."""
  size = 256
  images = [prepare.decode_example((i, encoded, 0), size)[1] for i, encoded in enumerate(jpegs)]
  rows = []
  for colour in decoded.COLOURS:
    start = time.perf_counter()
    for i, encoded in enumerate(jpegs):
      decoded.encode_pixels(prepare.decode_example((i, encoded, 0), size)[1], colour)
    per_core = len(jpegs) / (time.perf_counter() - start)
    start = time.perf_counter()
    stored = [decoded.encode_pixels(image, colour) for image in images]
    layout_ms = 1e3 * (time.perf_counter() - start) / len(images)
    out = os.path.join(out_root, colour)
    start = time.perf_counter()
    manifest = prepare.prepare(f"folder:{folder}", out, image_format="decoded", colour=colour,
                               size=size, workers=os.cpu_count())
    seconds = time.perf_counter() - start
    written = sum(manifest.examples.values())
    row = {"format": "decoded", "colour": colour, "size": size,
           "images": written, "seconds": round(seconds, 1), "cores": os.cpu_count(),
           "images_per_sec": round(written / seconds, 1),
           "images_per_sec_by_workers": {str(w): worker_rate(jpegs, size=size, colour=colour,
                                                             workers=w) for w in (1, 2)},
           "images_per_sec_per_core": round(per_core, 1),
           "layout_ms_per_image": round(layout_ms, 3),
           "bytes_per_image": manifest.bytes_per_image,
           "imagenet_train_gb": round(manifest.bytes_per_image * IMAGENET_TRAIN / 1e9, 1),
           "imagenet_train_gib": round(manifest.bytes_per_image * IMAGENET_TRAIN / 2**30, 1),
           "imagenet_core_hours": round(IMAGENET_IMAGES / per_core / 3600, 2)}
    if colour == "yuv420":
      back = decoded.rows_to_rgb(np.stack(stored), colour=colour, size=size).astype(np.float64)
      error = np.mean((back - np.stack(images).astype(np.float64)) ** 2)
      row["psnr_vs_rgb_db"] = round(float(10 * np.log10(255.0**2 / error)), 1)
      row["max_level_difference_vs_rgb"] = int(np.max(np.abs(back - np.stack(images))))
      if importlib.util.find_spec("simplejpeg"):  # the JPEG path's decoder
        row["levels_vs_jpeg_path"] = yuv420_vs_jpeg_path(images, size=size)
    rows.append(row)
    print(json.dumps(row), flush=True)
  return rows


def worker_rate(jpegs: list[bytes], *, size: int, colour: str, workers: int) -> float:
  """Images/s of `workers` worker processes doing a decoded preparation's work (decode, crop,
  colour layout: prepare.decode_to_row) on `jpegs`, as prepare's pool hands it out, once the
  workers have started (their start is timed apart: a benchmark this small would be mostly
  that)."""
  import multiprocessing
  items = [((i, encoded, 0), size, colour) for i, encoded in enumerate(jpegs)]
  with multiprocessing.get_context("spawn").Pool(workers) as pool:
    list(pool.imap(prepare._decode_to_row_with, items[:2 * workers], chunksize=1))  # started
    start = time.perf_counter()
    list(pool.imap(prepare._decode_to_row_with, items, chunksize=16))
    return round(len(items) / (time.perf_counter() - start), 1)


def yuv420_vs_jpeg_path(images: list[np.ndarray], *, size: int) -> dict:
  """How far a YUV 4:2:0 set made from the JPEG path's images (prepare --source=prepared:DIR)
  lies from the JPEG path's own pixels, both decoded by libjpeg-turbo: each crop stored as the
  JPEG path stores it (q90) and decoded (simplejpeg), laid out as YUV 4:2:0 and decoded on the
  devices; |difference| in levels over every pixel and channel."""
  jpeg_path = np.stack([np.empty((size, size, 3), np.uint8) for _ in images])
  for image, out in zip(images, jpeg_path):
    prepared.decode_record(prepared.encode_record(0, image, image_format="jpeg", quality=90),
                           image_format="jpeg", size=size, out_HWC=out)
  rows = np.stack([decoded.encode_pixels(image, "yuv420") for image in jpeg_path])
  difference = np.abs(decoded.rows_to_rgb(rows, colour="yuv420", size=size).astype(np.int16)
                      - jpeg_path)
  return {"mean": round(float(difference.mean()), 2),
          "p99": int(np.percentile(difference, 99)), "max": int(difference.max())}


def decoded_rows(out_root: str, *, batches: int, image_size: int, global_batch: int,
                 dry_run: bool = False) -> list[dict]:
  """Each colour layout read for an `image_size` model: on the first device, the jitted gather,
  colour conversion and augmentation of a batch of row numbers; on the host, batches gathered
  from the memory-mapped file on one thread and on a thread per core."""
  device = jax.devices()[0]
  sharding = NamedSharding(jax.make_mesh((1,), ("data",), devices=[device]), P("data"))
  # The bare step the finish goes in front of: configs/imagenet_single.py's model in bfloat16
  # (the tiny one at 64² in a dry run), pipelined.
  config = imagenet_single.get_config()
  config.update(model=config.model if image_size == config.image_size else "alexnet_owt_tiny",
                image_size=image_size, dtype="bfloat16", global_batch_size=global_batch)
  # A dry run checks the code path, not the figure: its step is the feeding rows' (the set's
  # classes, which a compilation cache then compiles once) and it is timed over DRY_STEPS.
  classes = 1000
  if dry_run:
    classes = decoded.Manifest.read(os.path.join(out_root, "yuv420")).num_classes
  step = step_timing.measure(config, num_classes=classes,
                             **(DRY_STEPS if dry_run else dict(steps=10, warmup=2)),
                             pipelined=True, cpu_gemm_n=DRY_CPU_GEMM_N if dry_run else None)
  rows = []
  for colour in decoded.COLOURS:
    directory = os.path.join(out_root, colour)
    resident = decoded.DecodedDataset(directory, image_size=image_size).placed(
        decoded.Placement(decoded.WHOLE, 1, "the benchmark places it"))
    finish = resident.device_input(sharding, seed=0, dtype=jax.numpy.bfloat16)
    batch_rows = jax.device_put(np.random.default_rng(0).integers(
        0, resident.num_train, global_batch).astype(np.int32), sharding)
    milliseconds = step_timing.median_ms(
        lambda: finish.finish_train(batch_rows, 0).block_until_ready(), 10)
    rows.append({"source": f"decoded {colour}", "placement": "devices",
                 "image_size": image_size, "stored_size": resident.manifest.size,
                 "global_batch": global_batch,
                 "device_work": "gather, " + ("YUV→RGB on the crop, " if colour == "yuv420"
                                              else "") + "crop, flip, lighting, normalise",
                 "device_images_per_sec": round(global_batch / (milliseconds / 1e3), 1),
                 # The finish as a program of its own against the bare step it feeds.
                 "finish_ms": round(milliseconds, 3), "model": config.model,
                 "bare_step_ms_pipelined": step["step_ms_pipelined"],
                 "finish_over_bare_step": round(milliseconds / step["step_ms_pipelined"], 3)})
    print(json.dumps(rows[-1]), flush=True)
    for threads in (1, os.cpu_count()):
      host = decoded.DecodedDataset(directory, image_size=image_size, threads=threads).placed(
          decoded.Placement(decoded.HOST, 1, "the benchmark reads it on the host"))
      row = {"source": f"decoded {colour}", "placement": "host", "image_size": image_size,
             "global_batch": global_batch, "workers": 0, "threads": threads, "cores": threads,
             "host_work": "gather rows from the memory-mapped file"}
      row.update(_rate(host, batches, global_batch=global_batch))
      row["images_per_sec_per_core"] = round(row["images_per_sec_median"] / threads, 1)
      rows.append(row)
      print(json.dumps(row), flush=True)
  rows.append(transfer_rates(sharding, global_batch=global_batch,
                             row_bytes=decoded.bytes_per_image("yuv420", 256), batches=batches))
  return rows


def transfer_rates(sharding, *, global_batch: int, row_bytes: int, batches: int) -> dict:
  """Images/s of host→device transfers of batches of `row_bytes` rows: one at a time, four in
  flight, and four in flight staged in pinned host memory (where the backend has it)."""
  import input_pipeline
  from input_pipeline.decoded import ordered_map
  host = np.random.default_rng(0).integers(0, 256, (global_batch, row_bytes), dtype=np.uint8)
  labels = np.zeros(global_batch, np.int32)
  count = max(8, 2 * batches)
  row = {"source": "host→device transfers", "placement": "transfer",
         "global_batch": global_batch, "row_bytes": row_bytes,
         "pinned_host": input_pipeline._has_pinned_host(sharding)}
  for name, threads, staged in (("one_at_a_time", 1, False), ("four_in_flight", 4, False),
                                ("four_in_flight_pinned", 4, True)):
    def transfer(_):
      return input_pipeline.to_global(sharding, host, labels, global_batch=global_batch,
                                      staged=staged)

    rates = []
    for _ in range(3):
      start = time.perf_counter()
      for images, _ in ordered_map(transfer, range(count), threads=threads, ahead=threads):
        images.block_until_ready()
      rates.append(count * global_batch / (time.perf_counter() - start))
    row[f"{name}_images_per_sec"] = round(float(np.median(rates)), 1)
  print(json.dumps(row), flush=True)
  return row


def repeated_set(source_dir: str, out: str, images: int) -> str:
  """A decoded set of `images` training rows: `source_dir`'s rows (and labels) repeated, its
  evaluation split as it is. What a set of ImageNet's size costs to hold and gather does not
  depend on what its pixels show."""
  manifest = decoded.Manifest.read(source_dir)
  os.makedirs(out, exist_ok=True)
  rows = manifest.images(source_dir, "train")
  labels = manifest.labels(source_dir, "train")
  with open(os.path.join(out, "train.images"), "wb") as f_images, \
       open(os.path.join(out, "train.labels"), "wb") as f_labels:
    for start in range(0, images, len(rows)):
      count = min(len(rows), images - start)
      f_images.write(np.asarray(rows[:count]).tobytes())
      f_labels.write(labels[:count].astype("<i4").tobytes())
  for name in ("eval.images", "eval.labels"):
    shutil.copy(os.path.join(source_dir, name), os.path.join(out, name))
  fields = dataclasses.asdict(manifest)
  fields.update(examples={**manifest.examples, "train": images},
                source=f"{manifest.source}, rows repeated to {images}")
  with open(os.path.join(out, decoded.MANIFEST), "w") as f:
    json.dump(fields, f, indent=1)
  return out


def feeding_rows(out_root: str, *, batches: list[int], steps: int, dry_run: bool,
                 resident_images: int, jpeg_ceiling: float | None,
                 budget_s: float, jpeg_path: bool = True) -> list[dict]:
  """main.py at each of `batches`, fed by synthetic data, the decoded set on the devices and
  from host memory, and the prepared JPEGs on a worker process per core; each against the
  pipelined bare step of the same config and against main.py on synthetic data."""
  deadline = time.perf_counter() + budget_s if budget_s else None
  config = imagenet_single.get_config()
  classes = decoded.Manifest.read(os.path.join(out_root, "decoded", "yuv420")).num_classes
  model = "alexnet_owt_tiny" if dry_run else _FEEDING_MODEL.value or config.model
  image_size = 64 if dry_run else _FEEDING_IMAGE_SIZE.value or config.image_size
  start = time.perf_counter()
  resident = repeated_set(os.path.join(out_root, "decoded", "yuv420"),
                          os.path.join(out_root, "resident"), resident_images)
  made_s = time.perf_counter() - start
  cores = os.cpu_count()
  paths = (("decoded yuv420 on the devices", (f"--config.dataset=decoded:{resident}",
                                              "--config.decoded_placement=devices")),
           ("decoded yuv420 from host memory", (f"--config.dataset=decoded:{resident}",
                                                "--config.decoded_placement=host")),
           ("prepared jpeg q90, a worker process per core",
            (f"--config.dataset=prepared:{os.path.join(out_root, 'prepared', 'jpeg')}",
             f"--config.input_workers={cores}")),
           ("synthetic", ("--config.dataset=synthetic", f"--config.synthetic_classes={classes}",
                          f"--config.synthetic_examples={max(batches) * 4}")))
  log_every = max(1, steps // 4)
  rows = []
  for batch in batches:
    config.update(model=model, image_size=image_size, dtype="bfloat16", global_batch_size=batch)
    step = step_timing.measure(config, num_classes=classes,
                               **(DRY_STEPS if dry_run else dict(steps=20, warmup=3)),
                               pipelined=True, cpu_gemm_n=DRY_CPU_GEMM_N if dry_run else None)
    synthetic_rate = None
    for name, data in reversed(paths):  # synthetic first: the others are set against it.
      row = {"source": name, "model": model, "dtype": "bfloat16", "batch": batch,
             "image_size": image_size, "classes": classes}
      if name.startswith("decoded"):
        row.update(resident_images=resident_images, resident_set_made_s=round(made_s, 1))
      if name.startswith("prepared") and jpeg_ceiling:
        row["jpeg_ceiling_images_per_sec"] = jpeg_ceiling
      if deadline and time.perf_counter() > deadline:
        rows.append({**row, "skipped": "the time budget was spent"})
        continue
      if name.startswith("prepared") and not jpeg_path:
        rows.append({**row, "skipped": "the JPEG path's readers are not installed"})
        continue
      overrides = (*data, f"--config.model={model}", f"--config.image_size={image_size}",
                   "--config.dtype=bfloat16", f"--config.global_batch_size={batch}",
                   f"--config.num_train_steps={steps}", f"--config.log_every_steps={log_every}",
                   f"--config.eval_every_steps={steps}",
                   f"--config.checkpoint_every_steps={steps}",
                   f"--config.eval_batch_size={batch}")
      try:
        with tempfile.TemporaryDirectory() as workdirs:
          run = main_runs.run_config(
              "imagenet_single", workdirs, overrides=overrides,
              run_name=f"feeding_{batch}", profile_steps=min(20, log_every - 1),
              timeout_s=max(30.0, deadline - time.perf_counter()) if deadline else None)
      except (main_runs.RunFailed, subprocess.TimeoutExpired) as e:
        rows.append({**row, "error": benchmarks.without_machine_paths(str(e))[-2000:]})
        print(json.dumps(rows[-1]), flush=True)
        continue
      row.update(main_runs.against_step(run, step))
      rate = row["trainer_images_per_sec"]
      if name == "synthetic":
        synthetic_rate = rate
      elif synthetic_rate:
        row["trainer_vs_synthetic"] = round(rate / synthetic_rate, 3)
      if "jpeg_ceiling_images_per_sec" in row:
        row["trainer_vs_jpeg_ceiling"] = round(rate / jpeg_ceiling, 3)
      rows.append(row)
      print(json.dumps(row), flush=True)
  return rows


def gather_far_rows(directory: str) -> dict:
  """The resident set whole on the first device, and rows gathered from it by row number as the
  step gathers them — the highest rows, past 2³¹ bytes into the set where it is that large (row
  21,846 on of YUV 4:2:0 at 256²) — compared with the file's."""
  source = decoded.DecodedDataset(directory, image_size=8).placed(
      decoded.Placement(decoded.WHOLE, 1, "the benchmark places it"))
  device = jax.devices()[0]
  sharding = NamedSharding(jax.make_mesh((1,), ("data",), devices=[device]), P("data"))
  finish = source.device_input(sharding, seed=0)
  file_rows = source.manifest.images(directory, "train")
  past = 2**31 // source.manifest.bytes_per_image + 1  # the first row past 2³¹ bytes
  rows = np.unique(np.concatenate([[0, min(past, source.num_train - 1)],
                                   np.linspace(past, source.num_train - 1, 14).astype(int)
                                   if past < source.num_train else [source.num_train - 1]]))
  rows = np.clip(rows, 0, source.num_train - 1).astype(np.int32)
  gathered = jax.jit(lambda held, r: device_augment.gather_rows(held, r, sharding))(
      finish.held, jax.device_put(rows, sharding))
  equal = bool(np.array_equal(np.asarray(gathered), np.asarray(file_rows[rows])))
  del finish, gathered
  return {"source": "decoded yuv420 gathered on the device", "rows": source.num_train,
          "set_bytes": source.set_bytes, "rows_gathered": rows.tolist(),
          "highest_byte_offset": int(rows.max()) * source.manifest.bytes_per_image,
          "past_2_31_bytes": int(rows.max()) * source.manifest.bytes_per_image >= 2**31,
          "equal_to_the_file": equal}


def cpu_model() -> str:
  """The host CPU's model name (Linux), else what the platform module knows."""
  try:
    with open("/proc/cpuinfo") as f:
      return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
  except (OSError, StopIteration):
    return platform.processor() or platform.machine()


def main(argv):
  del argv
  # Pillow makes the benchmark's JPEGs, for every section, and tfds reads them with TensorFlow
  # (the JPEG path's own readers, where missing, only skip its rows: below).
  benchmarks.require_extra("imagenet", ["PIL", *(("tensorflow", "tensorflow_datasets")
                                                 if "tfds" in _SECTIONS.value else ())])
  platforms.start()  # before anything queries the devices.
  dry = _DRY_RUN.value
  images = 48 if dry else _IMAGES.value
  batches = 4 if dry else _BATCHES.value
  sections = _SECTIONS.value
  h100_peak = step_timing.GPU_PEAKS["H100"]["bfloat16"]
  flops = costmodel.training_flops_per_image(models.ARCHITECTURES["alexnet_owt"], 224, 1000)
  result = {
      "date": time.strftime("%Y-%m-%d"), "cpu": cpu_model(),
      "cpu_count": os.cpu_count(), "benchmark_images": images,
      "pipelines": [], "prepare": [], "trainer": [], "decoded_prepare": [], "decoded": [],
      "feeding": [],
      "eight_h100_need": {
          "training_flops_per_image": round(flops / 1e9, 2) * 1e9,
          "assumed_mfu": CONVNET_MFU, "peak_flops_per_gpu": h100_peak,
          "images_per_sec": round(8 * h100_peak * CONVNET_MFU / flops)},
  }
  work = tempfile.mkdtemp(prefix="input_pipeline_benchmark_")
  try:
    folder = os.path.join(work, "images")
    jpegs = make_jpegs(folder, images, photos_dir=_PHOTOS_DIR.value)
    if "tfds" in sections:
      result["pipelines"].append(tfds_row(jpegs, batches=batches,
                                          examples=GLOBAL_BATCH if dry else 2048))
    # The JPEG path's writer and readers (the imagenet extra): without them its rows are
    # skipped, saying so, and the rest is measured.
    missing = extras.missing("the JPEG path's rows", "imagenet",
                             ("array_record", "grain", "simplejpeg"))
    jpeg_path = missing is None
    if not jpeg_path:
      print(f"skipped: {missing}", flush=True)
      result["prepare"] = [{"format": "jpeg", "skipped": str(missing)}]
    elif {"prepare", "prepared", "trainer"} & set(sections):
      result["prepare"] = prepare_rows(folder, os.path.join(work, "prepared"), jpegs)
    elif "feeding" in sections:  # the feeding rows read only the JPEGs
      result["prepare"] = prepare_rows(folder, os.path.join(work, "prepared"), jpegs,
                                       formats=("jpeg",))
    if {"decoded_prepare", "decoded", "feeding"} & set(sections):
      result["decoded_prepare"] = decoded_prepare_rows(folder, os.path.join(work, "decoded"),
                                                       jpegs)
    if "decoded" in sections:
      result["decoded"] = decoded_rows(os.path.join(work, "decoded"), batches=batches,
                                       image_size=64 if dry else 224,
                                       global_batch=16 if dry else GLOBAL_BATCH, dry_run=dry)
    if "prepared" in sections and jpeg_path:
      result["pipelines"] += prepared_rows(os.path.join(work, "prepared"),
                                           batches=batches,
                                           image_size=64 if dry else 224,
                                           global_batch=16 if dry else GLOBAL_BATCH)
    if "trainer" in sections and jpeg_path:
      result["trainer"] = trainer_rows(os.path.join(work, "prepared"),
                                       batch=16 if dry else _TRAINER_BATCH.value,
                                       steps=8 if dry else _TRAINER_STEPS.value, dry_run=dry)
    if "feeding" in sections:
      ceiling = None
      if jpeg_path:  # its ceiling: every core decoding at one core's rate (read apart, here)
        one_core = prepared_rows(os.path.join(work, "prepared"), batches=batches,
                                 image_size=64 if dry else 224,
                                 global_batch=16 if dry else GLOBAL_BATCH, only_one_core=True)
        result["pipelines"] += one_core
        ceiling = round(one_core[0]["images_per_sec_median"] * os.cpu_count(), 1)
      result["feeding"] = feeding_rows(
          work, batches=[16] if dry else [int(b) for b in _FEEDING_BATCHES.value],
          steps=8 if dry else _FEEDING_STEPS.value, dry_run=dry,
          resident_images=64 if dry else _RESIDENT_IMAGES.value, jpeg_ceiling=ceiling,
          budget_s=_BUDGET_S.value, jpeg_path=jpeg_path)
      # Last: the set whole on the device would hold its memory while main.py runs.
      result["far_rows"] = gather_far_rows(os.path.join(work, "resident"))
      print(json.dumps(result["far_rows"]), flush=True)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  print(json.dumps(result, indent=1))
  # A dry run's tiny figures are worth keeping only where asked for.
  out = None if dry and not _OUTPUT.chosen else _OUTPUT.path("input_pipeline.json")
  if out and _UNDER.value:
    result = {**(benchmarks.load_if_present(out) or {}), _UNDER.value: result}
  if out:
    benchmarks.publish(result, out)


if __name__ == "__main__":
  app.run(main)
