"""A prepared dataset: images stored once as Krizhevsky stored ImageNet, read at random by Grain.

What `python -m input_pipeline.prepare` writes into a directory:
  prepared.json                          the manifest, written last: format, stored size, classes,
                                         per split its files and image counts (its presence means
                                         every shard was written and checked)
  train-00000-of-00313.array_record ...  ArrayRecord files (one record per image, group size 1,
  eval-00000-of-00013.array_record ...   so any image is one seek away)
  *.array_record.json                    per shard: images written and skipped (resume, checks)

Each record is the label (int32, little-endian) followed by the image: the central 256×256 patch
after the shorter side was resized to 256 (for a 224 model), either JPEG-encoded at the stated
quality ("jpeg", ~10× smaller) or as raw uint8 HWC ("raw", nothing to decode).

Reading (`PreparedDataset`, the source `prepared:DIR` of input_pipeline.load): the global batch of
step s is the s-th slice of a fresh permutation of the training images per epoch — a pure
function of (seed, s), as for the in-memory datasets (arrays.train_indices), so the *position* a
checkpoint stores is the step, batches are the same on any mesh and process count, and a restart
continues exactly, across epoch boundaries too. Each process reads only its rows. The host decodes
and copies uint8 at the stored size, with Grain: a thread per host core in the training process
by default, or `input_workers` worker processes; either way whole batches, in step order.
Cropping, flipping, PCA lighting and normalisation happen on the devices (device_augment.py).
No TensorFlow is needed.
"""

import dataclasses
import io
import json
import os
import struct
import sys

import jax.numpy as jnp
import numpy as np

from hybrid_parallel import extras
from hybrid_parallel.errors import UserError
from input_pipeline import arrays, imagenet_stats
from input_pipeline.source import DeviceInput, StepPositioned


def read_manifest(cls, path: str):
  """The manifest dataclass `cls` read from the JSON at `path` (lists as tuples); one sentence
  when the file is not a manifest this version can read. Shared by the JPEG and decoded formats."""
  try:
    with open(path) as f:
      fields = json.load(f)
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})
  except (ValueError, TypeError) as e:
    raise UserError(f"{path} is not a manifest this version can read ({e}); prepare the "
                    f"dataset again.") from None


MANIFEST = "prepared.json"
FORMATS = ("jpeg", "raw")
SPLITS = ("train", "eval")
_LABEL = struct.Struct("<i")


def shard_file(split: str, index: int, count: int) -> str:
  return f"{split}-{index:05d}-of-{count:05d}.array_record"


def encode_record(label: int, image_HWC: np.ndarray, *, image_format: str, quality: int) -> bytes:
  """One record: the label, then the image as JPEG or raw bytes."""
  if image_format == "raw":
    payload = np.ascontiguousarray(image_HWC, np.uint8).tobytes()
  else:
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(image_HWC).save(out, format="JPEG", quality=quality)
    payload = out.getvalue()
  return _LABEL.pack(label) + payload


def record_label(record: bytes) -> int:
  return _LABEL.unpack_from(record)[0]


def decode_record(record: bytes, *, image_format: str, size: int,
                  out_HWC: np.ndarray | None = None) -> int:
  """Writes the record's image into `out_HWC` (uint8 size×size×3) and returns its label.

  JPEGs decode with simplejpeg (libjpeg-turbo) straight into `out_HWC`: the same pixels as
  Pillow's decoder, in ~60% of its time per image, as Pillow's path to a NumPy array copies
  the image twice (docs/input_pipeline.md)."""
  label = record_label(record)
  payload = memoryview(record)[_LABEL.size:]
  if out_HWC is None:
    out_HWC = np.empty((size, size, 3), np.uint8)
  if image_format == "raw":
    out_HWC[...] = np.frombuffer(payload, np.uint8).reshape(size, size, 3)
  else:
    import simplejpeg
    simplejpeg.decode_jpeg(payload, colorspace="RGB", buffer=out_HWC)
  return label


@dataclasses.dataclass(frozen=True)
class Manifest:
  """What prepared.json says about a prepared directory."""
  image_format: str
  quality: int
  size: int
  num_classes: int
  class_names: tuple
  source: str
  files: dict  # split → file names
  examples: dict  # split → images
  skipped: dict  # split → images that could not be decoded when prepared
  mean: tuple
  std: tuple

  def to_json(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def read(cls, directory: str) -> "Manifest":
    """The manifest of `directory`, or one UserError that says what is missing."""
    path = os.path.join(directory, MANIFEST)
    if not os.path.isdir(directory):
      raise UserError(f"prepared dataset directory {directory!r} does not exist; make it with "
                      f"`python -m input_pipeline.prepare --source=... --out={directory}`.")
    if not os.path.isfile(path):
      started = any(f.endswith(".array_record") or f.endswith(".partial")
                    for f in os.listdir(directory))
      raise UserError(
          f"{directory!r} holds a preparation that did not finish (no {MANIFEST}); run the same "
          f"`python -m input_pipeline.prepare` command again to complete it." if started else
          f"{directory!r} is not a prepared dataset (no {MANIFEST}); make it with "
          f"`python -m input_pipeline.prepare --source=... --out={directory}`.")
    manifest = read_manifest(cls, path)
    for split in SPLITS:
      missing = [f for f in manifest.files[split]
                 if not os.path.isfile(os.path.join(directory, f))]
      if missing:
        raise UserError(f"{directory!r} lacks {len(missing)} of its {split} files (first: "
                        f"{missing[0]}); copy the whole directory or prepare it again.")
    return manifest


def _prepare_for_grain():
  """Grain reads absl flags: a notebook or script that never parsed them gets their defaults.

  And Grain's workers hand batches over in shared memory, which the training process unlinks
  as it consumes them. Python before 3.13 registers a segment with the resource tracker both when
  it is made and when it is opened (CPython issue 82300), so at exit the tracker warns of
  "leaked" segments that are already gone (/dev/shm is empty after a run). The tracker process
  starts with the first worker and takes its warning filters from this environment.
  """
  from absl import flags
  if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()
  if sys.version_info < (3, 13):
    filters = [f for f in os.environ.get("PYTHONWARNINGS", "").split(",") if f]
    if _TRACKER_FILTER not in filters:
      os.environ["PYTHONWARNINGS"] = ",".join(filters + [_TRACKER_FILTER])


_TRACKER_FILTER = "ignore:resource_tracker:UserWarning"


class _Batches:
  """step (or eval batch) → this process's rows of it, decoded: picklable, for Grain's workers."""

  def __init__(self, paths, *, rows_of, image_format: str, size: int):
    self.paths, self.rows_of = paths, rows_of
    self.image_format, self.size = image_format, size
    self._source = None

  def __getstate__(self):
    return {**self.__dict__, "_source": None}  # each worker opens the files itself.

  def __call__(self, index: int):
    if self._source is None:
      import grain
      self._source = grain.sources.ArrayRecordDataSource(list(self.paths))
    ids, weights = self.rows_of(index)
    images = np.empty((len(ids), self.size, self.size, 3), np.uint8)
    labels = np.empty(len(ids), np.int32)
    for i, record_id in enumerate(ids.tolist()):
      # One read per record: ArrayRecord's batched read (__getitems__) measured 2-4× slower
      # per image here, on files in the page cache.
      labels[i] = decode_record(self._source[record_id], image_format=self.image_format,
                                size=self.size, out_HWC=images[i])
    return images, labels, weights


@dataclasses.dataclass(frozen=True)
class _TrainRows:
  num_train: int
  global_batch: int
  seed: int
  shard: slice

  def __call__(self, step: int):
    ids = arrays.batch_indices(self.num_train, self.global_batch, seed=self.seed, step=step)
    return ids[self.shard], None  # every training row counts


@dataclasses.dataclass(frozen=True)
class _EvalRows:
  num_eval: int
  batch: int
  shard: slice

  def __call__(self, index: int):
    ids = np.arange(index * self.batch, (index + 1) * self.batch)
    weights = (ids < self.num_eval).astype(np.float32)
    return np.minimum(ids, self.num_eval - 1)[self.shard], weights[self.shard]


class PreparedDataset(StepPositioned):
  """The source `prepared:DIR` (see the module docstring)."""

  def __init__(self, directory: str, *, image_size: int, workers: int = 0,
               threads: int | None = None, pca_lighting_std: float = 0.1, eval_crops: int = 1):
    self.directory = directory
    self.manifest = Manifest.read(directory)
    self.name = f"prepared:{directory}"
    readers = ("grain", "array_record") + (("simplejpeg",) if self.manifest.image_format == "jpeg"
                                           else ())
    extras.require(f"the prepared dataset {directory!r}", "imagenet", readers)
    if image_size > self.manifest.size:
      raise UserError(f"image_size {image_size} is larger than the {self.manifest.size}² images "
                      f"prepared in {directory!r}; prepare them with --size="
                      f"{imagenet_stats.resize_size(image_size)} or train at most at {self.manifest.size}.")
    self.image_size, self.pca_stddev, self.eval_crops = image_size, pca_lighting_std, eval_crops
    # Reading and decoding release the GIL, so threads of the training process use every core
    # (workers = 0, the default: fastest on the 2-core machine, docs/input_pipeline.md); worker
    # processes, one thread each, are there for hosts where the GIL would bind the threads.
    self.workers = workers
    self.threads = threads or (os.cpu_count() if workers == 0 else 1)
    self.num_classes = self.manifest.num_classes
    self.channels = 3
    self.num_train = self.manifest.examples["train"]
    self.num_eval = self.manifest.examples["eval"]
    self.mean, self.std = self.manifest.mean, self.manifest.std

  # Host→device transfers in flight (input_pipeline.train_iterator): a single transfer at a time
  # bounds what a host can feed a GPU well below what its cores decode (docs/input_pipeline.md).
  transfer_threads = 4

  def _paths(self, split: str):
    return tuple(os.path.join(self.directory, f) for f in self.manifest.files[split])

  def _read(self, split: str, rows_of, *, first: int, count: int):
    """Grain: the batches first..first+count-1 that `rows_of` names, decoded by this process's
    threads or by worker processes, in order."""
    _prepare_for_grain()
    import grain
    batches = _Batches(self._paths(split), rows_of=rows_of,
                       image_format=self.manifest.image_format, size=self.manifest.size)
    # A few batches ahead per decoding process, not Grain's default of 500 (50 MB each at 256²).
    read = grain.ReadOptions(num_threads=self.threads, prefetch_buffer_size=2 * self.threads)
    dataset = grain.MapDataset.range(first, first + count).map(batches).to_iter_dataset(read)
    if self.workers > 0:
      dataset = dataset.mp_prefetch(grain.MultiprocessingOptions(num_workers=self.workers))
    return iter(dataset)

  # --- the source interface (source.py) ---------------------------------------------------------

  def train_batches(self, global_batch: int, *, seed: int, position: int, shard: slice):
    """Yields (uint8 images at the stored size, labels, step + 1) for this process's rows."""
    rows = _TrainRows(self.num_train, global_batch, seed, shard)
    stream = self._read("train", rows, first=position, count=2**40)
    try:
      for step, (images, labels, _) in enumerate(stream, start=position):
        yield images, labels, step + 1
    finally:
      _close(stream)

  def eval_batches(self, batch: int, shard: slice):
    """Yields (uint8 images, labels, weights); the last batch is padded with weight-0 repeats."""
    count = -(-self.num_eval // batch)
    stream = self._read("eval", _EvalRows(self.num_eval, batch, shard), first=0, count=count)
    try:
      yield from stream
    finally:
      _close(stream)

  def device_input(self, sharding, *, seed: int, dtype=jnp.float32,
                   place: bool = True) -> DeviceInput:
    """The uint8 batches cropped, flipped, lit and normalised on the devices
    (device_augment.py); nothing is placed."""
    del place
    from input_pipeline import device_augment
    size = self.manifest.size
    train, evaluate = device_augment.finishes(
        sharding, seed=seed, image_size=self.image_size, stored=(size, size),
        pca_stddev=self.pca_stddev, mean=self.mean, std=self.std, crops=self.eval_crops,
        dtype=dtype)
    return DeviceInput(train=lambda held, images, step: train(images, step), evaluate=evaluate)


def _close(stream):
  """Stops Grain's worker processes now rather than at interpreter exit (where their shutdown
  finds half-torn-down modules)."""
  close = getattr(stream, "close", None)
  if close:
    close()
