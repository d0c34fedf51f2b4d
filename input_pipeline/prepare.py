r"""Prepares a dataset once, as Krizhevsky stored ImageNet, for the fast reader (prepared.py).

  python -m input_pipeline.prepare --source=imagenet2012 --out=DIR [--format=jpeg] \
      [--quality=90] [--size=256] [--workers=N] [--data_dir=TFDS_DIR]

--source is a tfds dataset (imagenet2012, imagenette/320px-v2; read with tfds, which must have it
prepared) or folder:PATH — PATH/train/CLASS/*.jpg and PATH/val/CLASS/*.jpg (or validation/), the
class of an image its folder, classes numbered in sorted order. Every image is decoded, its
shorter side resized to --size (antialiased bilinear; JPEGs are first decoded at the smallest
DCT scale that still leaves --size pixels), and the central --size² patch stored, JPEG-encoded at
--quality or as raw uint8 (--format=raw: ~10× the disk, nothing to decode when training). An image
that cannot be decoded is skipped and counted. Train with `--config.dataset=prepared:DIR`.

Resumable: each shard is written to a .partial file, read back and checked (its record count and
labels), then renamed; a second run skips the shards already complete, and prepared.json — the
manifest the reader needs — is written last. Progress is logged per shard.

--format=decoded [--colour=yuv420|rgb] writes the images decoded, as uint8 rows of one
memory-mappable file per split (decoded.py): nothing is decoded when training, and the set can be
held in device memory. --source may then also be prepared:DIR, a JPEG or raw preparation, whose
stored images are decoded as the prepared reader decodes them. The disk's free space is checked
against what is left to write before anything is written.
"""

import dataclasses
import io
import itertools
import json
import multiprocessing
import os
import sys
import time

from absl import app, flags, logging
import numpy as np

from hybrid_parallel import extras
from hybrid_parallel.errors import UserError
from input_pipeline import imagenet_stats, prepared

TFDS_SOURCES = {"imagenet2012": "validation", "imagenette/320px-v2": "validation"}
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


def krizhevsky_crop(encoded, size: int) -> np.ndarray:
  """Decodes an image (its file's bytes, or uint8 RGB pixels already decoded), resizes its
  shorter side to `size` and returns the central size² patch (uint8 RGB)."""
  from PIL import Image
  if isinstance(encoded, np.ndarray):
    opened = Image.fromarray(encoded)
  else:
    opened = Image.open(io.BytesIO(encoded))
    opened.draft("RGB", (size, size))  # a JPEG decodes at 1/2, 1/4 or 1/8 scale when that fits
  with opened as image:
    image = image.convert("RGB")
    width, height = image.size
    scale = size / min(width, height)
    new_width, new_height = max(size, round(width * scale)), max(size, round(height * scale))
    image = image.resize((new_width, new_height), Image.BILINEAR)  # antialiased when shrinking
    top, left = imagenet_stats.crop_offset("centre", height=new_height, width=new_width,
                                           size=size)
    return np.asarray(image.crop((left, top, left + size, top + size)))


@dataclasses.dataclass(frozen=True)
class Settings:
  """What a preparation is made with; a resumed run must use the same."""
  source: str
  image_format: str
  quality: int
  size: int


def encode_example(item, settings: Settings):
  """(id, encoded image, label) → (id, record or None, why not)."""
  example_id, encoded, label = item
  try:
    image = krizhevsky_crop(encoded, settings.size)
  except Exception as e:  # noqa: BLE001 — PIL raises many types for a bad file; all mean skip it.
    return example_id, None, f"{type(e).__name__}: {e}"
  return example_id, prepared.encode_record(label, image, image_format=settings.image_format,
                                            quality=settings.quality), None


def decode_example(item, size: int):
  """(id, encoded image, label) → (id, uint8 RGB size² image or None, why not, label)."""
  example_id, encoded, label = item
  try:
    return example_id, krizhevsky_crop(encoded, size), None, label
  except Exception as e:  # noqa: BLE001 — PIL raises many types for a bad file; all mean skip it.
    return example_id, None, f"{type(e).__name__}: {e}", label


def decode_to_row(item, size: int, colour: str):
  """(id, encoded image, label) → (id, its row of a decoded set in the `colour` layout
  (decoded.encode_pixels) or None, why not, label): the whole of an image's preparation, so
  that worker processes do all of it."""
  from input_pipeline import decoded
  example_id, image, why, label = decode_example(item, size)
  return example_id, None if image is None else decoded.encode_pixels(image, colour), why, label


def _decode_to_row_with(arguments):
  return decode_to_row(*arguments)


# --- inputs -----------------------------------------------------------------------------------


class FolderInput:
  """folder:PATH — PATH/train/CLASS/* and PATH/val/CLASS/* (or validation/)."""

  def __init__(self, path: str):
    if not os.path.isdir(path):
      raise UserError(f"image folder {path!r} does not exist.")
    eval_dir = next((d for d in ("val", "validation") if os.path.isdir(os.path.join(path, d))),
                    None)
    if not os.path.isdir(os.path.join(path, "train")) or eval_dir is None:
      raise UserError(f"image folder {path!r} needs train/ and val/ (or validation/), each with "
                      f"one folder of images per class.")
    self.class_names = tuple(sorted(
        d for d in os.listdir(os.path.join(path, "train"))
        if os.path.isdir(os.path.join(path, "train", d))))
    if not self.class_names:
      raise UserError(f"{os.path.join(path, 'train')!r} holds no class folders.")
    self.num_classes = len(self.class_names)
    self._files = {"train": self._list(os.path.join(path, "train")),
                   "eval": self._list(os.path.join(path, eval_dir))}
    for split, files in self._files.items():
      if not files:
        raise UserError(f"the {split} images of {path!r} are missing: no image files in its "
                        f"class folders.")

  def _list(self, split_dir: str):
    labels = {name: i for i, name in enumerate(self.class_names)}
    files = []
    for name in sorted(os.listdir(split_dir)):
      if name not in labels:
        if os.path.isdir(os.path.join(split_dir, name)):
          raise UserError(f"{os.path.join(split_dir, name)!r} is a class the training folder "
                          f"does not have.")
        continue
      folder = os.path.join(split_dir, name)
      files += [(os.path.join(folder, f), labels[name]) for f in sorted(os.listdir(folder))
                if f.lower().endswith(IMAGE_SUFFIXES)]
    return files

  def count(self, split: str) -> int:
    return len(self._files[split])

  def examples(self, split: str, start: int):
    """(id, encoded image, label) from the `start`-th image of `split` on."""
    for path, label in self._files[split][start:]:
      with open(path, "rb") as f:
        yield path, f.read(), label


class TfdsInput:
  """A tfds image-classification dataset, its records read still encoded."""

  def __init__(self, name: str, data_dir: str | None):
    from input_pipeline import tfds_source  # TensorFlow is needed here only.
    import tensorflow_datasets as tfds
    self._tfds = tfds
    self.builder = tfds_source._prepared_builder(name, tfds_source.SPECS[name], data_dir,
                                                 download=name != "imagenet2012")
    features = self.builder.info.features
    self.num_classes = features["label"].num_classes
    self.class_names = tuple(features["label"].names)
    self._splits = {"train": "train", "eval": TFDS_SOURCES[name]}

  def _counted_by_metadata(self, split: str):
    try:
      return self.builder.info.splits[self._splits[split]].num_examples
    except (KeyError, ValueError):
      return None  # no metadata (tfds.testing.mock_data): counted by reading.

  def count(self, split: str) -> int:
    known = self._counted_by_metadata(split)
    return known if known is not None else sum(1 for _ in self._read(self._splits[split]))

  def _read(self, split_spec: str):
    return self.builder.as_dataset(split=split_spec, shuffle_files=False,
                                   decoders={"image": self._tfds.decode.SkipDecoding()})

  def examples(self, split: str, start: int):
    """(id, encoded image, label) from the `start`-th record of `split` on, in stored order:
    read from there (tfds's split slicing) where the metadata counts the split, else skipped to."""
    name = self._splits[split]
    if self._counted_by_metadata(split) is not None:
      ds = self._read(f"{name}[{start}:]" if start else name)
    else:
      ds = self._read(name).skip(start)
    for i, example in enumerate(ds.as_numpy_iterator(), start=start):
      yield f"{split}[{i}]", example["image"], int(example["label"])


class PreparedInput:
  """prepared:DIR — a JPEG or raw preparation (prepared.py), its stored images read in order.
  JPEGs are decoded as the prepared reader decodes them (simplejpeg, libjpeg-turbo's defaults):
  decoded at their stored size, the pixels the JPEG path trains on."""

  def __init__(self, directory: str):
    self.directory = directory
    self.manifest = prepared.Manifest.read(directory)
    self.num_classes = self.manifest.num_classes
    self.class_names = self.manifest.class_names

  def count(self, split: str) -> int:
    return self.manifest.examples[split]

  def examples(self, split: str, start: int):
    """(id, uint8 RGB image, label) from the `start`-th stored image of `split` on."""
    from array_record.python import array_record_module
    size, index = self.manifest.size, 0
    for name in self.manifest.files[split]:
      reader = array_record_module.ArrayRecordReader(os.path.join(self.directory, name))
      try:
        count = reader.num_records()
        for k in range(max(0, start - index), count):
          image = np.empty((size, size, 3), np.uint8)
          label = prepared.decode_record(reader.read([k])[0],
                                         image_format=self.manifest.image_format, size=size,
                                         out_HWC=image)
          yield f"{name}[{k}]", image, label
        index += count
      finally:
        reader.close()


def open_input(source: str, data_dir: str | None):
  if source.startswith("folder:"):
    return FolderInput(source[len("folder:"):])
  if source.startswith("prepared:"):
    return PreparedInput(source[len("prepared:"):])
  if source in TFDS_SOURCES:
    return TfdsInput(source, data_dir)
  raise UserError(f"unknown --source {source!r}; choose one of {', '.join(TFDS_SOURCES)}, "
                  f"folder:PATH or prepared:DIR.")


# --- writing ----------------------------------------------------------------------------------


def _sidecar(path: str) -> str:
  return path + ".json"


def _write_json(path: str, value) -> None:
  """Writes `value` to `path` atomically: a reader sees the old file or the whole new one."""
  with open(path + ".tmp", "w") as f:
    json.dump(value, f, indent=1)
  os.replace(path + ".tmp", path)


def _completed(path: str, settings: Settings):
  """The sidecar of a shard already written and checked with `settings`, or None."""
  if not (os.path.isfile(path) and os.path.isfile(_sidecar(path))):
    return None
  with open(_sidecar(path)) as f:
    done = json.load(f)
  if done["settings"] != dataclasses.asdict(settings):
    raise UserError(f"{os.path.dirname(path)!r} holds a preparation made with "
                    f"{done['settings']}, not {dataclasses.asdict(settings)}; use another --out "
                    f"or the same flags.")
  return done


def _check_shard(path: str, *, labels: list, settings: Settings) -> None:
  """Reads a written shard back: every record there, labels as written, first and last decode."""
  from array_record.python import array_record_module
  reader = array_record_module.ArrayRecordReader(path)
  try:
    count = reader.num_records()
    if count != len(labels):
      raise RuntimeError(f"{path}: {count} records read back, {len(labels)} written")
    image = np.empty((settings.size, settings.size, 3), np.uint8)
    for index in sorted({0, count - 1}) if count else ():
      label = prepared.decode_record(reader.read([index])[0], image_format=settings.image_format,
                                     size=settings.size, out_HWC=image)
      if label != labels[index]:
        raise RuntimeError(f"{path}: record {index} has label {label}, {labels[index]} written")
  finally:
    reader.close()


def write_shard(path: str, items, *, settings: Settings, encode) -> dict:
  """Writes the records of `items` to `path` (via path.partial), checked; returns its sidecar."""
  from array_record.python import array_record_module
  # One record per chunk (any image one seek away), stored as is: JPEG does not compress
  # further, and raw's point is that reading it costs nothing but the copy.
  writer = array_record_module.ArrayRecordWriter(path + ".partial", "group_size:1,uncompressed")
  labels, skipped = [], []
  try:
    for example_id, record, why in encode(items):
      if record is None:
        skipped.append(example_id)
        logging.warning("skipped %s: %s", example_id, why)
        continue
      writer.write(record)
      labels.append(prepared.record_label(record))
  finally:
    writer.close()
  _check_shard(path + ".partial", labels=labels, settings=settings)
  os.replace(path + ".partial", path)
  done = {"settings": dataclasses.asdict(settings), "examples": len(labels),
          "skipped": len(skipped), "skipped_ids": skipped, "bytes": os.path.getsize(path)}
  _write_json(_sidecar(path), done)
  return done


FORMATS = prepared.FORMATS + ("decoded",)


def _require_packages(source: str, image_format: str) -> None:
  """One UserError naming the imagenet extra's packages that reading `source` and writing
  `image_format` need and are missing: Pillow decodes and resizes every image (a folder's
  included), tfds reads its datasets with TensorFlow, a prepared source is ArrayRecord files of
  JPEGs (simplejpeg), and JPEG and raw records are written as ArrayRecord files."""
  if source.startswith("folder:"):
    readers = ("PIL",)
  elif source.startswith("prepared:"):
    readers = ("array_record", "simplejpeg", "PIL")
  elif source in TFDS_SOURCES:
    readers = ("tensorflow", "tensorflow_datasets", "PIL")
  else:
    return  # open_input names the sources there are.
  writers = () if image_format == "decoded" else ("array_record",)
  extras.require("python -m input_pipeline.prepare", "imagenet",
                 list(dict.fromkeys(readers + writers)))


def prepare(source: str, out: str, *, image_format: str = "jpeg", quality: int = 90,
            size: int = 256, images_per_shard: int = 4096, workers: int = 0,
            data_dir: str | None = None, colour: str = "yuv420",
            free_disk: int | None = None):
  """Prepares `source` into `out` (see the module docstring); returns the manifest written
  (decoded.Manifest for --format=decoded, else prepared.Manifest). `free_disk`: the bytes a
  decoded preparation may take (default: the disk's free space)."""
  if image_format not in FORMATS:
    raise UserError(f"unknown --format {image_format!r}; choose one of {', '.join(FORMATS)}.")
  if image_format == "decoded":
    return prepare_decoded(source, out, size=size, workers=workers, data_dir=data_dir,
                           colour=colour, free_disk=free_disk)
  if not 1 <= quality <= 100 or size < 8 or images_per_shard < 1:
    raise UserError("--quality must be 1..100, --size at least 8 and --images_per_shard at "
                    "least 1.")
  if os.path.exists(out) and not os.path.isdir(out):
    raise UserError(f"--out {out!r} is a file, not a directory.")
  _require_packages(source, image_format)
  settings = Settings(source, image_format, quality if image_format == "jpeg" else 0, size)
  if os.path.isfile(os.path.join(out, prepared.MANIFEST)):
    manifest = prepared.Manifest.read(out)
    made_with = Settings(manifest.source, manifest.image_format, manifest.quality, manifest.size)
    if made_with != settings:
      raise UserError(f"{out!r} already holds a preparation made with "
                      f"{dataclasses.asdict(made_with)}; use another --out.")
    logging.info("%s is already prepared (%s); nothing to do.", out, prepared.MANIFEST)
    return manifest
  data = open_input(source, data_dir)
  os.makedirs(out, exist_ok=True)
  pool = multiprocessing.get_context("spawn").Pool(workers) if workers > 1 else None

  def encode(items):
    """(id, record or None, why) per item, in order: on `workers` processes, or here."""
    if pool:
      return pool.imap(_encode_with, ((item, settings) for item in items), chunksize=8)
    return (encode_example(item, settings) for item in items)

  files, examples, skipped, total_bytes = {}, {}, {}, 0
  start = time.perf_counter()
  try:
    for split in prepared.SPLITS:
      count = data.count(split)
      shards = max(1, -(-count // images_per_shard))
      files[split], examples[split], skipped[split] = [], 0, 0
      stream = None  # one sequential read of the split, reopened after shards already written
      for k in range(shards):
        name = prepared.shard_file(split, k, shards)
        path = os.path.join(out, name)
        begin, end = k * count // shards, (k + 1) * count // shards
        done = _completed(path, settings)
        shard_start = time.perf_counter()
        if done is None:
          stream = stream or data.examples(split, begin)
          done = write_shard(path, itertools.islice(stream, end - begin), settings=settings,
                             encode=encode)
          rate = (end - begin) / (time.perf_counter() - shard_start)
          logging.info("%s shard %d/%d: %d images (%d skipped), %.0f images/s", split, k + 1,
                       shards, done["examples"], done["skipped"], rate)
        else:
          stream = None
          logging.info("%s shard %d/%d: already written", split, k + 1, shards)
        files[split].append(name)
        examples[split] += done["examples"]
        skipped[split] += done["skipped"]
        total_bytes += done["bytes"]
  finally:
    if pool:
      pool.close()
      pool.join()
  for split in prepared.SPLITS:
    if examples[split] == 0:
      raise UserError(f"none of the {split} images of {source!r} could be decoded.")
  manifest = prepared.Manifest(
      image_format=image_format, quality=settings.quality, size=size,
      num_classes=data.num_classes, class_names=tuple(data.class_names), source=source,
      files=files, examples=examples, skipped=skipped, mean=imagenet_stats.MEAN,
      std=imagenet_stats.STD)
  _write_json(os.path.join(out, prepared.MANIFEST), manifest.to_json())
  logging.info("prepared %s into %s: %s images, %s skipped, %.2f GB, %.0f s", source, out,
               examples, skipped, total_bytes / 1e9, time.perf_counter() - start)
  return manifest


def _encode_with(item_and_settings):
  return encode_example(*item_and_settings)


def prepare_decoded(source: str, out: str, *, size: int = 256, workers: int = 0,
                    data_dir: str | None = None, colour: str = "yuv420",
                    free_disk: int | None = None):
  """--format=decoded: every image decoded once into decoded.py's files, decoded, cropped and
  laid out in its colour layout on `workers` processes (0 or 1: this one); this process writes."""
  from input_pipeline import decoded
  if size < 8:
    raise UserError("--size must be at least 8.")
  if os.path.exists(out) and not os.path.isdir(out):
    raise UserError(f"--out {out!r} is a file, not a directory.")
  if colour not in decoded.COLOURS:  # before the input is opened (a tfds source is slow to)
    raise UserError(f"unknown --colour {colour!r}; choose one of {', '.join(decoded.COLOURS)}.")
  _require_packages(source, "decoded")
  data = open_input(source, data_dir)
  pool = multiprocessing.get_context("spawn").Pool(workers) if workers > 1 else None

  def decode_many(items):
    if pool:
      return pool.imap(_decode_to_row_with, ((item, size, colour) for item in items),
                       chunksize=16)
    return (decode_to_row(item, size, colour) for item in items)

  try:
    return decoded.prepare(data, out, source=source, colour=colour, size=size,
                           encode_many=decode_many, free_disk=free_disk,
                           log=lambda message: logging.info("%s", message))
  finally:
    if pool:
      pool.close()
      pool.join()


def define_flags() -> None:
  """The command line's flags: defined only when run as a program, so that importing this module
  (the benchmarks, the tests) leaves absl's flag names free."""
  flags.DEFINE_string("source", None, "imagenet2012, imagenette/320px-v2, folder:PATH or (with "
                      "--format=decoded) prepared:DIR.")
  flags.DEFINE_string("out", None, "The directory to write.")
  flags.DEFINE_enum("format", "jpeg", FORMATS, "How images are stored: JPEG records, raw records, "
                    "or decoded rows of one memory-mappable file per split.")
  flags.DEFINE_enum("colour", "yuv420", ("yuv420", "rgb"), "--format=decoded: YUV 4:2:0 (half "
                    "the bytes) or RGB (the decoded pixels exactly).")
  flags.DEFINE_integer("quality", 90, "JPEG quality (--format=jpeg).")
  flags.DEFINE_integer("size", 256, "Stored side: 256 for a 224 model.")
  flags.DEFINE_integer("images_per_shard", 4096, "Images per ArrayRecord file.")
  flags.DEFINE_integer("workers", os.cpu_count(), "Processes that decode and encode.")
  flags.DEFINE_string("data_dir", None, "tfds's data directory (tfds sources).")
  flags.mark_flags_as_required(["source", "out"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  given = flags.FLAGS
  try:
    prepare(given.source, given.out, image_format=given.format, quality=given.quality,
            size=given.size, images_per_shard=given.images_per_shard, workers=given.workers,
            data_dir=given.data_dir, colour=given.colour)
  except UserError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  define_flags()
  app.run(main)
