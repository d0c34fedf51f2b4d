r"""A decoded dataset: every image decoded once to uint8 at its stored size, held where the step is.

  python -m input_pipeline.prepare --source=SOURCE --out=DIR --format=decoded [--colour=yuv420]
  python main.py --config=configs/imagenet_single.py --config.dataset=decoded:DIR

What `--format=decoded` writes into DIR (the stored size S: 256 for a 224 model):
  decoded.json            the manifest, written last: colour, S, bytes per image, classes, per
                          split its image count and the images that could not be decoded
  train.images            N × bytes-per-image uint8, row r the r-th image, nothing else in the
  eval.images             file: memory-mapped as an (N, bytes) array and read at random
  train.labels            N int32, little-endian
  eval.labels
  train.progress.json     while a split is written: the inputs read, the rows kept, the skipped
                          (a rerun continues there; removed when the split is complete)

A row holds the central S² patch (after the shorter side was resized to S) in one of two colour
layouts:
  rgb     S·S·3 bytes, HWC: exactly the pixels the JPEG path decodes;
  yuv420  S·S bytes of luma (Y), then (S/2)² of Cb and (S/2)² of Cr (JFIF's full-range BT.601,
          the chroma averaged over 2×2 pixels before it is rounded): half the bytes — the chroma
          sampling ImageNet's JPEGs already have — turned back into RGB on the devices.

Reading (`DecodedDataset`, the source `decoded:DIR` of input_pipeline.load): the global batch of
step s is arrays.batch_indices(N, batch, seed, s), the order of the in-memory and prepared
sources — a pure function of (seed, s), so the position a checkpoint stores is the step and the
batches are the same on any mesh and process count. Where the set goes (`placement`):
  devices  placed in device memory once — a whole copy on every device where one fits, else
           each device holds its share of the rows over the mesh's "data" axis (its process
           reads only those) — and each batch leaves the host as row numbers: the jitted
           program gathers the rows (from the other devices' shares with one reduce-scatter
           over "data" when the set is split), turns YUV into RGB, crops, flips, lights and
           normalises them (device_augment.py), as the in-memory sets are gathered;
  host     gathered from the memory-mapped file by host threads into whole batches, several
           host→device transfers in flight (through pinned host memory where the backend has
           it; the CPU backend has none, and there a transfer is a copy), finished on the
           devices the same way;
  auto     devices where the set fits in the devices' free memory less `RESERVE_BYTES` for the
           model, else host; host on CPU devices (the host's own cores).
"""

import concurrent.futures
import dataclasses
import json
import os
import shutil
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from hybrid_parallel.errors import UserError
from input_pipeline import DECODED_PLACEMENTS, arrays, device_augment, imagenet_stats, prepared
from input_pipeline.source import StepPositioned

MANIFEST = "decoded.json"
COLOURS = ("yuv420", "rgb")
SPLITS = ("train", "eval")
PLACEMENTS = DECODED_PLACEMENTS
# Device memory kept for the model beside a resident set: the largest AlexNet training program
# measured on one H200 took 4.7 GiB (float32, batch 512: docs/gpu.json's program_gib), and
# evaluation and XLA's scratch come on top; 8 GiB covers them with room to spare.
RESERVE_BYTES = 8 * 2**30
# Images decoded between two progress records: what a stopped preparation does again at most.
CHECKPOINT_IMAGES = 4096

# JFIF's RGB ↔ YCbCr (full range, BT.601), as libjpeg converts: Y, Cb, Cr rows of RGB weights.
_TO_YCBCR = np.array([[0.299, 0.587, 0.114],
                      [-0.168735892, -0.331264108, 0.5],
                      [0.5, -0.418687589, -0.081312411]], np.float32)
_CR_TO_R, _CB_TO_G, _CR_TO_G, _CB_TO_B = 1.402, -0.344136286, -0.714136286, 1.772


def bytes_per_image(colour: str, size: int) -> int:
  return size * size * 3 if colour == "rgb" else size * size + 2 * (size // 2) ** 2


def encode_pixels(image_HWC: np.ndarray, colour: str) -> np.ndarray:
  """One row of the file: uint8 RGB `image_HWC` in the `colour` layout, flat."""
  if colour == "rgb":
    return np.ascontiguousarray(image_HWC, np.uint8).reshape(-1)
  height, width = image_HWC.shape[:2]
  red, green, blue = (image_HWC[..., c].astype(np.float32) for c in range(3))
  # Plane by plane: a (…, 3) @ (3, 3) product is ~40× slower in NumPy (no BLAS for it).
  luma, cb, cr = (w[0] * red + w[1] * green + w[2] * blue for w in _TO_YCBCR)

  def halved(plane):  # the mean of each 2×2 block, then the offset
    return plane.reshape(height // 2, 2, width // 2, 2).mean(axis=(1, 3)) + np.float32(128)

  return np.concatenate([np.clip(np.rint(p), 0, 255).astype(np.uint8).reshape(-1)
                         for p in (luma, halved(cb), halved(cr))])


def rows_to_rgb(rows_BN, *, colour: str, size: int):
  """Rows of the file (B × bytes) → uint8 RGB images B×S×S×3, on the devices (jax) or NumPy
  alike: YUV 4:2:0's chroma repeated over its 2×2 pixels, converted, rounded to the nearest level
  as a JPEG decoder rounds."""
  xp = jnp if isinstance(rows_BN, jax.Array) else np
  batch = rows_BN.shape[0]
  if colour == "rgb":
    return rows_BN.reshape(batch, size, size, 3)
  half = size // 2
  luma = rows_BN[:, :size * size].reshape(batch, size, size).astype(xp.float32)

  def chroma(start):
    plane = rows_BN[:, start:start + half * half].reshape(batch, half, half)
    plane = xp.repeat(xp.repeat(plane, 2, axis=1), 2, axis=2)
    return plane.astype(xp.float32) - xp.float32(128)

  cb, cr = chroma(size * size), chroma(size * size + half * half)
  rgb = xp.stack([luma + xp.float32(_CR_TO_R) * cr,
                  luma + xp.float32(_CB_TO_G) * cb + xp.float32(_CR_TO_G) * cr,
                  luma + xp.float32(_CB_TO_B) * cb], axis=-1)
  return xp.clip(xp.round(rgb), 0, 255).astype(xp.uint8)


# --- the files ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Manifest:
  """What decoded.json says about a decoded directory."""
  colour: str
  size: int
  bytes_per_image: int
  num_classes: int
  class_names: tuple
  source: str
  examples: dict  # split → images stored
  skipped: dict  # split → the ids of the images that could not be decoded
  mean: tuple
  std: tuple

  @classmethod
  def read(cls, directory: str) -> "Manifest":
    """The manifest of `directory`, or one UserError that says what is missing."""
    path = os.path.join(directory, MANIFEST)
    make = f"make it with `python -m input_pipeline.prepare --format=decoded --out={directory}`"
    if not os.path.isdir(directory):
      raise UserError(f"decoded dataset directory {directory!r} does not exist; {make}.")
    if not os.path.isfile(path):
      started = any(f.endswith(".progress.json") or f.endswith(".images")
                    for f in os.listdir(directory))
      raise UserError(
          f"{directory!r} holds a decoded preparation that did not finish (no {MANIFEST}); run "
          f"the same `python -m input_pipeline.prepare` command again to complete it." if started
          else f"{directory!r} is not a decoded dataset (no {MANIFEST}); {make}.")
    manifest = prepared.read_manifest(cls, path)
    for split in SPLITS:
      for suffix, item_bytes in ((".images", manifest.bytes_per_image), (".labels", 4)):
        file = os.path.join(directory, split + suffix)
        want = manifest.examples[split] * item_bytes
        if not os.path.isfile(file) or os.path.getsize(file) != want:
          raise UserError(f"{file!r} is missing or not {want} bytes long; copy the whole "
                          f"directory or prepare it again.")
    return manifest

  def images(self, directory: str, split: str) -> np.ndarray:
    """The split's rows, memory-mapped read-only (N × bytes_per_image uint8)."""
    return np.memmap(os.path.join(directory, split + ".images"), np.uint8, "r",
                     shape=(self.examples[split], self.bytes_per_image))

  def labels(self, directory: str, split: str) -> np.ndarray:
    return np.fromfile(os.path.join(directory, split + ".labels"), "<i4").astype(np.int32)


def _write_json(path: str, value) -> None:
  """Writes `value` to `path` atomically: a reader sees the old file or the whole new one."""
  with open(path + ".tmp", "w") as f:
    json.dump(value, f, indent=1)
    f.flush()
    os.fsync(f.fileno())
  os.replace(path + ".tmp", path)


def free_disk_bytes(path: str) -> int:
  """Free bytes on the disk that holds `path` (or would: its nearest existing parent)."""
  path = os.path.abspath(path)
  while not os.path.exists(path):
    path = os.path.dirname(path)
  return shutil.disk_usage(path).free


def _gb(n: float) -> str:
  return f"{n / 1e9:,.1f} GB"


def prepare(data, out: str, *, source: str, colour: str, size: int, encode_many,
            free_disk: int | None = None, checkpoint_images: int = CHECKPOINT_IMAGES,
            log=print) -> Manifest:
  """Decodes every image of `data` (prepare.py's inputs) into `out` (the module docstring).

  `encode_many(items)` yields (id, RGB size² uint8 image or None, why not, label) for the
  (id, encoded image, label) items in order (prepare.py: on every core). `free_disk`: the bytes
  the disk may take (default: what it has free) — checked, with everything the preparation has
  left to write, before anything is written. `checkpoint_images`: inputs between two progress
  records.
  """
  if colour not in COLOURS:
    raise UserError(f"unknown --colour {colour!r}; choose one of {', '.join(COLOURS)}.")
  if colour == "yuv420" and size % 2:
    raise UserError(f"--size {size} is odd; YUV 4:2:0 halves it (use an even size or "
                    f"--colour=rgb).")
  settings = {"source": source, "colour": colour, "size": size}
  row_bytes = bytes_per_image(colour, size)
  if os.path.isfile(os.path.join(out, MANIFEST)):
    manifest = Manifest.read(out)
    made_with = {"source": manifest.source, "colour": manifest.colour, "size": manifest.size}
    if made_with != settings:
      raise UserError(f"{out!r} already holds a decoded preparation made with {made_with}; use "
                      f"another --out.")
    log(f"{out} is already prepared ({MANIFEST}); nothing to do.")
    return manifest
  counts = {split: data.count(split) for split in SPLITS}
  progress = {split: _read_progress(out, split, settings) for split in SPLITS}
  left = sum((counts[s] - progress[s]["inputs"]) * (row_bytes + 4) for s in SPLITS)
  available = free_disk_bytes(out) if free_disk is None else free_disk
  if left > available:
    raise UserError(
        f"--out {out!r} needs {_gb(left)} more for {sum(counts.values()):,} images of "
        f"{row_bytes:,} bytes ({colour}, {size}²) and its disk has {_gb(available)} free; free "
        f"space or prepare elsewhere" + (" (or with --colour=yuv420, half the bytes)."
                                         if colour == "rgb" else "."))
  os.makedirs(out, exist_ok=True)
  start = time.perf_counter()
  for split in SPLITS:
    _prepare_split(data, out, split, settings=settings, count=counts[split],
                   progress=progress[split], row_bytes=row_bytes, encode_many=encode_many,
                   checkpoint_images=checkpoint_images, log=log)
  examples = {s: _read_progress(out, s, settings)["rows"] for s in SPLITS}
  skipped = {s: _read_progress(out, s, settings)["skipped"] for s in SPLITS}
  for split in SPLITS:
    if examples[split] == 0:
      raise UserError(f"none of the {split} images of {source!r} could be decoded.")
  manifest = Manifest(colour=colour, size=size, bytes_per_image=row_bytes,
                      num_classes=data.num_classes, class_names=tuple(data.class_names),
                      source=source, examples=examples, skipped=skipped,
                      mean=imagenet_stats.MEAN, std=imagenet_stats.STD)
  _write_json(os.path.join(out, MANIFEST), dataclasses.asdict(manifest))
  for split in SPLITS:
    os.remove(_progress_path(out, split))
  log(f"decoded {source} into {out}: {examples} images, {sum(map(len, skipped.values()))} "
      f"skipped, {_gb(sum(examples.values()) * row_bytes)}, {time.perf_counter() - start:.0f} s")
  return manifest


def _progress_path(out: str, split: str) -> str:
  return os.path.join(out, split + ".progress.json")


def _read_progress(out: str, split: str, settings: dict) -> dict:
  """The split's progress record (a fresh one where there is none); a record of other settings
  is refused."""
  path = _progress_path(out, split)
  if not os.path.isfile(path):
    if os.path.isfile(os.path.join(out, MANIFEST)):
      manifest = Manifest.read(out)
      return {"settings": settings, "inputs": manifest.examples[split]
              + len(manifest.skipped[split]), "rows": manifest.examples[split],
              "skipped": list(manifest.skipped[split])}
    return {"settings": settings, "inputs": 0, "rows": 0, "skipped": []}
  with open(path) as f:
    progress = json.load(f)
  if progress["settings"] != settings:
    raise UserError(f"{out!r} holds a decoded preparation made with {progress['settings']}, not "
                    f"{settings}; use another --out or the same flags.")
  return progress


def _prepare_split(data, out: str, split: str, *, settings: dict, count: int, progress: dict,
                   row_bytes: int, encode_many, checkpoint_images: int, log) -> None:
  """Appends the split's images from where `progress` stopped; records progress every
  `checkpoint_images` inputs, after the rows and labels are on disk."""
  if progress["inputs"] >= count and os.path.isfile(_progress_path(out, split)):
    return
  flags = os.O_RDWR | os.O_CREAT
  images = os.open(os.path.join(out, split + ".images"), flags)
  labels = os.open(os.path.join(out, split + ".labels"), flags)
  try:
    # Whatever lies past the last record was written by a run that stopped before recording it.
    os.truncate(images, progress["rows"] * row_bytes)
    os.truncate(labels, progress["rows"] * 4)
    stream = data.examples(split, progress["inputs"])
    window_start = time.perf_counter()
    window_inputs = 0
    for example_id, image, why, label in encode_many(stream):
      progress["inputs"] += 1
      window_inputs += 1
      if image is None:
        progress["skipped"].append(str(example_id))
        log(f"skipped {example_id}: {why}")
      else:
        row = encode_pixels(image, settings["colour"])
        os.pwrite(images, row.tobytes(), progress["rows"] * row_bytes)
        os.pwrite(labels, np.int32(label).astype("<i4").tobytes(), progress["rows"] * 4)
        progress["rows"] += 1
      if progress["inputs"] % checkpoint_images == 0 or progress["inputs"] == count:
        os.fsync(images)
        os.fsync(labels)
        _write_json(_progress_path(out, split), progress)
        rate = window_inputs / (time.perf_counter() - window_start)
        log(f"{split}: {progress['inputs']:,}/{count:,} images ({len(progress['skipped'])} "
            f"skipped), {rate:.0f} images/s")
        window_start, window_inputs = time.perf_counter(), 0
    _write_json(_progress_path(out, split), progress)
  finally:
    os.close(images)
    os.close(labels)


# --- reading ------------------------------------------------------------------------------------


def available_memory_bytes() -> int:
  """Host memory available to new allocations (Linux's MemAvailable; else the total)."""
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def device_memory_bytes(devices) -> int:
  """What each of `devices` has free for data: the smallest free memory among them, less
  RESERVE_BYTES for the model. CPU devices report no memory: their buffers are host memory,
  shared by this process's devices."""
  free = []
  for device in devices:
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and "bytes_limit" in stats:
      free.append(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
  if not free:  # half the host's memory, split over its devices; the rest for everything else.
    return available_memory_bytes() // 2 // max(1, len(devices))
  return max(0, min(free) - RESERVE_BYTES)


def ordered_map(function, items, *, threads: int, ahead: int):
  """function(item) for each item of the iterator `items`, run on `threads` threads, at most
  `ahead` items ahead of the one yielded; yielded in order. `items` is read by the caller's thread
  only."""
  pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="input_pipeline")
  pending = []
  try:
    items = iter(items)
    exhausted = False
    while True:
      while not exhausted and len(pending) < ahead:
        try:
          pending.append(pool.submit(function, next(items)))
        except StopIteration:
          exhausted = True
      if not pending:
        return
      yield pending.pop(0).result()
  finally:
    for future in pending:
      future.cancel()
    pool.shutdown(wait=True)


class DecodedDataset(StepPositioned):
  """The source `decoded:DIR` (see the module docstring)."""

  def __init__(self, directory: str, *, image_size: int, placement: str = "auto",
               pca_lighting_std: float = 0.1, eval_crops: int = 1, threads: int | None = None,
               transfers: int = 4, device_memory: int | None = None):
    """`device_memory`: the bytes each device may give the set (default: device_memory_bytes);
    `threads`: the host threads that gather batches (placement host; default one per core);
    `transfers`: the host→device transfers in flight."""
    if placement not in PLACEMENTS:
      raise UserError(f"decoded_placement {placement!r} is not one of {', '.join(PLACEMENTS)}.")
    self.directory = directory
    self.manifest = Manifest.read(directory)
    self.name = f"decoded:{directory}"
    size = self.manifest.size
    if image_size > size:
      raise UserError(f"image_size {image_size} is larger than the {size}² images decoded in "
                      f"{directory!r}; prepare them with --size="
                      f"{imagenet_stats.resize_size(image_size)} or train at most at {size}.")
    self.image_size, self.pca_stddev, self.eval_crops = image_size, pca_lighting_std, eval_crops
    self.placement = placement
    self.threads = threads or os.cpu_count()
    self.transfers = transfers
    self.device_memory = device_memory
    self.num_classes = self.manifest.num_classes
    self.channels = 3
    self.num_train = self.manifest.examples["train"]
    self.num_eval = self.manifest.examples["eval"]
    self.mean, self.std = self.manifest.mean, self.manifest.std
    self.train_labels = self.manifest.labels(directory, "train")
    self.eval_labels = self.manifest.labels(directory, "eval")
    self._resident = None  # where the set lies: `where`'s answer, at device_transforms.
    self._placed = {}  # sharding → the training rows on the devices, placed at the first batch.

  @property
  def set_bytes(self) -> int:
    return self.num_train * self.manifest.bytes_per_image

  def settle(self, devices, *, data: int) -> str:
    """Decides, before any work, where the set goes on a mesh of `devices` (this process's
    among them are used) whose "data" axis has `data` devices: `where`'s answer, kept."""
    local = [d for d in devices if d.process_index == jax.process_index()]
    self._resident = self._where(local, data=data)
    return self._resident

  def where(self, mesh) -> str:
    """Where the training set goes on `mesh`: "replicated" (a copy on every device), "sharded"
    (each device its share of the rows over "data") or "host"; a UserError, before anything is
    read, where the set was asked onto the devices and does not fit there."""
    return self._where(mesh.local_devices, data=mesh.shape.get("data", 1))

  def _where(self, devices, *, data: int) -> str:
    if self.placement == "auto" and devices[0].platform == "cpu":
      # CPU "devices" are the host's own cores: gathering and converting whole rows inside the
      # step costs it, gathering on host threads does not (docs/input_pipeline.md).
      return "host"
    budget = device_memory_bytes(devices) if self.device_memory is None else self.device_memory
    share = -(-self.num_train // data) * self.manifest.bytes_per_image
    if self.placement != "host":
      if self.set_bytes <= budget:
        return "replicated"
      if data > 1 and share <= budget:
        return "sharded"
    if self.placement == "devices":
      raise UserError(
          f"decoded_placement 'devices': the {_gb(self.set_bytes)} training set of "
          f"{self.directory!r} ({_gb(share)} per device split over the mesh's {data} data "
          f"shards) does not fit in the {_gb(budget)} each device has for it; use "
          f"decoded_placement = 'host' or 'auto', or more devices"
          + (", or --colour=yuv420." if self.manifest.colour == "rgb" else "."))
    return "host"

  # --- the source interface (source.py) ---------------------------------------------------------

  def train_batches(self, global_batch: int, *, seed: int, position: int, shard: slice):
    """Yields this process's rows (`shard` of each global batch) from step `position` on: their
    row numbers where the set is on the devices, else the rows gathered from the file."""
    def rows_of(step):
      return arrays.batch_indices(self.num_train, global_batch, seed=seed, step=step)[shard]

    if self._resident is None:
      raise RuntimeError("device_transforms places the set; call it before train_batches.")
    if self._resident != "host":
      step = position
      while True:
        rows = rows_of(step)
        yield rows.astype(np.int32), self.train_labels[rows], step + 1
        step += 1
    images = self.manifest.images(self.directory, "train")

    def gather(step):
      rows = rows_of(step)
      return np.take(images, rows, axis=0), self.train_labels[rows], step + 1

    steps = iter(range(position, 2**62))
    yield from ordered_map(gather, steps, threads=self.threads, ahead=2 * self.threads)

  def eval_batches(self, batch: int, shard: slice):
    """Yields (rows gathered from the file, labels, weights); the last batch is padded with
    weight-0 repeats."""
    images = self.manifest.images(self.directory, "eval")
    for start in range(0, self.num_eval, batch):
      ids = np.arange(start, start + batch)
      weights = (ids < self.num_eval).astype(np.float32)
      ids = np.minimum(ids, self.num_eval - 1)[shard]
      yield np.asarray(images[ids]), self.eval_labels[ids], weights[shard]

  @property
  def transfer_threads(self) -> int:
    """Host→device transfers in flight (input_pipeline.train_iterator): several where batches
    leave the host as images."""
    return self.transfers if self._resident == "host" else 1

  def device_transforms(self, sharding, *, seed: int):
    """(train, eval) on the devices of `sharding`: train takes the row numbers (set on the
    devices, placed at this call) or the gathered rows (host), eval the gathered rows; both turn
    rows into RGB and finish them as device_augment does the prepared JPEGs."""
    mesh = sharding.mesh
    if self._resident is None:
      self._resident = self.where(mesh)
    colour, size = self.manifest.colour, self.manifest.size
    train = device_augment.train_transform(sharding, seed=seed, image_size=self.image_size,
                                           pca_stddev=self.pca_stddev, mean=self.mean,
                                           std=self.std)
    evaluate = device_augment.eval_transform(sharding, image_size=self.image_size,
                                             crops=self.eval_crops, mean=self.mean, std=self.std)
    to_rgb = jax.jit(lambda rows: device_augment.lay_out(
        rows_to_rgb(rows, colour=colour, size=size), sharding))
    finish_eval = lambda rows: evaluate(to_rgb(rows))
    if self._resident == "host":
      return (lambda rows, step: train(to_rgb(rows), step)), finish_eval
    gather = (self._replicated_gather(sharding) if self._resident == "replicated" else
              self._sharded_gather(sharding))
    return (lambda rows, step: train(to_rgb(gather(rows)), step)), finish_eval

  def _place(self, sharding: NamedSharding):
    """The training rows on the devices of `sharding`'s mesh, laid out as `sharding` says (rows
    padded to a multiple of its row shards); each process reads only its devices' rows. Once per
    layout: train and eval transforms, and a restarted iterator, share it."""
    if sharding not in self._placed:
      self._placed[sharding] = self._read_onto(sharding)
    return self._placed[sharding]

  def _read_onto(self, sharding: NamedSharding):
    images = self.manifest.images(self.directory, "train")
    shards = sharding.mesh.shape["data"] if sharding.spec else 1
    rows = -(-self.num_train // shards) * shards

    def read(index):
      start, stop, _ = index[0].indices(rows)
      if stop <= self.num_train:
        return images[start:stop]  # straight from the mapped file: no copy of the set here
      block = np.zeros((stop - start, images.shape[1]), np.uint8)  # the last share, padded
      block[:max(0, self.num_train - start)] = images[start:self.num_train]
      return block

    return jax.make_array_from_callback((rows, images.shape[1]), sharding, read)

  def _replicated_gather(self, sharding: NamedSharding):
    """rows (laid out as the batch) → those rows of a whole copy on every device: no
    communication."""
    mesh = sharding.mesh
    everywhere = NamedSharding(mesh, PartitionSpec())
    gather = jax.jit(lambda x, rows: device_augment.gather_rows(x, rows, sharding),
                     out_shardings=sharding)
    return lambda rows: gather(self._place(everywhere), rows)

  def _sharded_gather(self, sharding: NamedSharding):
    """the global batch's rows (replicated) → those rows laid out as the batch, each device
    holding 1/D of the set over "data": each device gathers the rows it holds (zeros for the
    others') and one reduce-scatter over "data" hands every device its batch rows (each row has
    exactly one non-zero contribution, so the sum is the row, exactly)."""
    mesh = sharding.mesh
    split = NamedSharding(mesh, PartitionSpec("data"))
    per_device = -(-self.num_train // mesh.shape["data"])

    def local(x_local, rows):
      first = jax.lax.axis_index("data") * per_device
      index = rows - first
      mine = (index >= 0) & (index < per_device)
      picked = jnp.where(mine[:, None], x_local[jnp.clip(index, 0, per_device - 1)],
                         jnp.uint8(0))
      return jax.lax.psum_scatter(picked, "data", scatter_dimension=0, tiled=True)

    spread = jax.shard_map(local, mesh=mesh, in_specs=(PartitionSpec("data"), PartitionSpec()),
                           out_specs=PartitionSpec("data"), check_vma=False)
    replicated = NamedSharding(mesh, PartitionSpec())

    @jax.jit
    def gather(x, rows):
      # Every device takes part in every row's gather: the batch's row numbers (B int32) are
      # gathered from the processes that sent them.
      rows = device_augment.lay_out(rows, replicated)
      return device_augment.lay_out(spread(x, rows), sharding)

    return lambda rows: gather(self._place(split), rows)
