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
          sampling ImageNet's JPEGs already have — turned back into RGB on the devices as
          libjpeg-turbo decodes a 4:2:0 JPEG (its "fancy" chroma upsampling, its integer
          colour conversion): not the RGB pixels, but what a JPEG decoder makes of these planes
          (docs/input_pipeline.md states how far that is from the JPEG path's pixels).

Reading (`DecodedDataset`, the source `decoded:DIR` of input_pipeline.load): the global batch of
step s is arrays.batch_indices(N, batch, seed, s), the order of the in-memory and prepared
sources — a pure function of (seed, s), so the position a checkpoint stores is the step and the
batches are the same on any mesh and process count. Where the set goes (`placement`, decided once
by experiment.feed — every process's reading agreed — and placed before the first step,
saying so in the log with its size, where and the seconds it took):
  devices  in device memory: a whole copy on every device where one fits, else each device
           holds its share of the rows over the mesh's "data" axis (its process reads only
           those); the step's own program gathers the rows — from the whole copy by row number,
           or, split, each device receiving only its batch rows in an all-to-all over "data"
           planned on the host (exchange.py) — turns YUV into RGB on each crop's window only,
           crops, flips, lights and normalises them (device_augment.py), as the in-memory sets
           are gathered;
  split    on the devices, split over "data" even where a whole copy would fit (memory for a
           larger model);
  host     gathered from the memory-mapped file by host threads into whole batches, several
           host→device transfers in flight (through pinned host memory where the backend has
           it; the CPU backend has none, and there a transfer is a copy), finished inside the
           step the same way;
  auto     devices where the set fits in the memory each device has free less what the run's
           compiled step takes (XLA's memory analysis), else host; host on CPU devices (the
           host's own cores) and on devices that report no memory statistics.
"""

import concurrent.futures
import copy
import dataclasses
import functools
import itertools
import json
import os
import shutil
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging
from jax.sharding import NamedSharding, PartitionSpec

from hybrid_parallel.errors import UserError
from input_pipeline import DECODED, DECODED_PLACEMENTS, arrays, device_augment, exchange
from input_pipeline import check_decoded_placement, imagenet_stats
from input_pipeline import prepared
from input_pipeline.source import DeviceInput, StepPositioned

MANIFEST = "decoded.json"
COLOURS = ("yuv420", "rgb")
SPLITS = ("train", "eval")
PLACEMENTS = DECODED_PLACEMENTS
# Images decoded between two progress records: what a stopped preparation does again at most.
CHECKPOINT_IMAGES = 4096

# JFIF's RGB ↔ YCbCr (full range, BT.601), as libjpeg converts: Y, Cb, Cr rows of RGB weights.
_TO_YCBCR = np.array([[0.299, 0.587, 0.114],
                      [-0.168735892, -0.331264108, 0.5],
                      [0.5, -0.418687589, -0.081312411]], np.float32)


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


def row_window(row, top, left, *, size: int, colour: str, stored: int):
  """The size² window at (top, left) of one row of the file (a flat uint8 jax array) as uint8
  RGB, on the devices. YUV 4:2:0 is turned into RGB as libjpeg-turbo decodes a 4:2:0 JPEG, in
  its integer arithmetic (`upsample_chroma`, `ycc_to_rgb`), on the window only: every output
  pixel depends on its own luma and a few chroma samples around it, so the window is the whole
  image's conversion cut at (top, left), bit for bit, at a fraction of the work."""
  if colour == "rgb":
    return jax.lax.dynamic_slice(row.reshape(stored, stored, 3), (top, left, 0), (size, size, 3))
  half = stored // 2
  luma = jax.lax.dynamic_slice(row[:stored * stored].reshape(stored, stored), (top, left),
                               (size, size))
  # The window's rows (and columns) top .. top + size − 1 need chroma rows top // 2 − 1 ..
  # (top + size − 1) // 2 + 1: at most size // 2 + 3 of them from top // 2 − 1. The plane is
  # padded with its edge values (libjpeg's context rows at the image's edges), one before and
  # two after, so that such a block never crosses it and dynamic_slice never moves it back.
  block = size // 2 + 3

  def chroma(start):
    plane = jnp.pad(row[start:start + half * half].reshape(half, half), ((1, 2), (1, 2)),
                    mode="edge")
    samples = jax.lax.dynamic_slice(plane, (top // 2, left // 2), (block, block))
    return jax.lax.dynamic_slice(upsample_chroma(samples), (top % 2, left % 2), (size, size))

  return ycc_to_rgb(luma, chroma(stored * stored), chroma(stored * stored + half * half))


def upsample_chroma(samples):
  """libjpeg-turbo's "fancy" h2v2 upsampling (jdsample.c, h2v2_fancy_upsample) of a block of
  chroma samples, integers: each output pixel is (9·its sample + 3·the nearer vertical and
  horizontal neighbours + 1·the diagonal one + 8 or 7) >> 4, summed vertically first. The
  block's first and last rows and columns serve only as neighbours: for samples of shape
  (h, w), the output is (2(h − 2), 2(w − 2)), pixel (2i + v, 2j + u) of sample (i + 1, j + 1)."""
  c = samples.astype(jnp.int32)
  rows = c.shape[0] - 2
  # Vertically: 3·sample + the row above (v = 0) or below (v = 1).
  sums = jnp.stack([3 * c[1:-1] + c[:-2], 3 * c[1:-1] + c[2:]], axis=1).reshape(2 * rows, -1)
  # Horizontally: 3·sum + the column left (+ 8) or right (+ 7), over 16.
  up = jnp.stack([(3 * sums[:, 1:-1] + sums[:, :-2] + 8) >> 4,
                  (3 * sums[:, 1:-1] + sums[:, 2:] + 7) >> 4], axis=2)
  return up.reshape(2 * rows, -1)


# libjpeg's YCbCr → RGB in 16-bit fixed point (jdcolor.c): FIX(x) = round(x · 2¹⁶).
_SCALE_BITS = 16
_FIX = {name: int(value * (1 << _SCALE_BITS) + 0.5)
        for name, value in (("cr_r", 1.40200), ("cb_b", 1.77200), ("cr_g", 0.71414),
                            ("cb_g", 0.34414))}


def ycc_to_rgb(luma, cb, cr):
  """uint8 RGB of luma and (upsampled) chroma levels, as libjpeg converts (jdcolor.c,
  ycc_rgb_convert): integer products rounded by adding ½ before the shift, clamped to 0..255."""
  y = luma.astype(jnp.int32)
  x_cb, x_cr = cb.astype(jnp.int32) - 128, cr.astype(jnp.int32) - 128
  half = 1 << (_SCALE_BITS - 1)
  red = y + ((_FIX["cr_r"] * x_cr + half) >> _SCALE_BITS)
  green = y + ((-_FIX["cb_g"] * x_cb + half - _FIX["cr_g"] * x_cr) >> _SCALE_BITS)
  blue = y + ((_FIX["cb_b"] * x_cb + half) >> _SCALE_BITS)
  return jnp.clip(jnp.stack([red, green, blue], axis=-1), 0, 255).astype(jnp.uint8)


def rows_to_rgb(rows_BN, *, colour: str, size: int) -> np.ndarray:
  """Whole rows of the file (B × bytes) → uint8 RGB images B×S×S×3 (`row_window` over the
  whole image)."""
  whole = jax.jit(jax.vmap(lambda row: row_window(row, 0, 0, size=size, colour=colour,
                                                  stored=size)))
  return np.asarray(whole(jnp.asarray(rows_BN)))


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
    make = (f"make it with `python -m input_pipeline.prepare --format=decoded --source=... "
            f"--out={directory}`")
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


def size_text(n: float) -> str:
  """A size in words: GB to a tenth, or MB / kB where a tenth of a GB would read "0.0 GB" (a
  test's set, a nearly full disk)."""
  for unit, scale in (("GB", 1e9), ("MB", 1e6)):
    if n >= scale / 10:
      return f"{n / scale:,.1f} {unit}"
  return f"{n / 1e3:,.1f} kB"


def prepare(data, out: str, *, source: str, colour: str, size: int, encode_many,
            free_disk: int | None = None, checkpoint_images: int = CHECKPOINT_IMAGES,
            log=print) -> Manifest:
  """Decodes every image of `data` (prepare.py's inputs) into `out` (the module docstring).

  `encode_many(items)` yields (id, the image's row in the `colour` layout (`encode_pixels`) or
  None, why not, label) for the (id, encoded image, label) items in order (prepare.py: decoded
  and laid out on every core). `free_disk`: the bytes
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
        f"--out {out!r} needs {size_text(left)} more for {sum(counts.values()):,} images of "
        f"{row_bytes:,} bytes ({colour}, {size}²) and its disk has {size_text(available)} free; "
        f"free space or prepare elsewhere" + (" (or with --colour=yuv420, half the bytes)."
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
      f"skipped, {size_text(sum(examples.values()) * row_bytes)}, "
      f"{time.perf_counter() - start:.0f} s")
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
    for example_id, row, why, label in encode_many(stream):
      progress["inputs"] += 1
      window_inputs += 1
      if row is None:
        progress["skipped"].append(str(example_id))
        log(f"skipped {example_id}: {why}")
      else:
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


def free_device_bytes(devices) -> int | None:
  """The smallest free memory among `devices` (their allocator's limit less what is in use);
  None where one reports no memory statistics. CPU devices' memory is the host's, shared by
  this process's devices: half of what it has available, split over them (the rest for
  everything else)."""
  if devices[0].platform == "cpu":
    return available_memory_bytes() // 2 // len(devices)
  free = []
  for device in devices:
    stats = device.memory_stats()
    if not stats or "bytes_limit" not in stats:
      return None
    free.append(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
  return min(free)


@dataclasses.dataclass(frozen=True)
class Placement:
  """Where a decoded training set lies for a run: decided once, before any work
  (experiment.feed, with every process's reading agreed), and passed on.

  Attributes:
    where: WHOLE (a copy on every device), SPLIT (each device its share of the rows over the
      mesh's "data" axis) or HOST (gathered from the memory-mapped file on host threads).
    data: the mesh's "data" shards (SPLIT: the set's shares).
    why: what decided it, for the run's log.
  """
  where: str
  data: int
  why: str


WHOLE, SPLIT, HOST = "whole", "split", "host"


def decide(asked: str, *, set_bytes: int, share_bytes: int, data: int, platform: str,
           budget: int | None, directory: str = "", colour: str = "yuv420") -> Placement:
  """Where the set goes (`asked`: a PLACEMENTS value) given the bytes each device may give it
  (`budget`, the smallest over every process's devices less what the step needs; None where
  the devices report no memory statistics); a UserError where it was asked onto the devices
  and does not fit there, or asked split over a mesh with fewer than 2 data shards."""
  if asked == "host":
    return Placement(HOST, data, "decoded_placement 'host'")
  check_decoded_placement(DECODED + directory, asked, data=data)
  if asked == "auto" and platform == "cpu":
    # CPU "devices" are the host's own cores: gathering on host threads costs the step nothing
    # it would not pay on the devices (docs/input_pipeline.md).
    return Placement(HOST, data, "on CPU devices, 'auto' reads on the host")
  if budget is None:
    if asked == "auto":
      return Placement(HOST, data, f"the {platform.upper()} devices report no memory "
                                   f"statistics, so whether the set fits cannot be known; "
                                   f"'auto' reads it on the host")
    where = SPLIT if asked == SPLIT or data > 1 else WHOLE
    return Placement(where, data, f"decoded_placement {asked!r}; the {platform.upper()} "
                                  f"devices report no memory statistics, so the fit is not "
                                  f"checked")
  room = f"{size_text(budget)} each device has for it"
  if asked != SPLIT and set_bytes <= budget:
    return Placement(WHOLE, data, f"the {size_text(set_bytes)} set fits in the {room}")
  if data > 1 and share_bytes <= budget:
    return Placement(SPLIT, data,
                     f"its {size_text(share_bytes)} share per device fits in the {room}"
                     + ("" if asked == SPLIT else f" (the whole {size_text(set_bytes)} does not)"))
  if asked == "auto":
    return Placement(HOST, data, f"the {size_text(set_bytes)} set ({size_text(share_bytes)} "
                                 f"per device split over {data} data shards) does not fit in "
                                 f"the {room}")
  raise UserError(
      f"decoded_placement {asked!r}: the {size_text(set_bytes)} training set of {directory!r} "
      f"({size_text(share_bytes)} per device split over the mesh's {data} data shards) does not "
      f"fit in the {room}; use decoded_placement = 'host' or 'auto', or more devices"
      + (", or --colour=yuv420." if colour == "rgb" else "."))


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
  """The source `decoded:DIR` (see the module docstring). Opened, it knows its files; placed
  (`placed`, with the run's Placement) it can be read."""

  def __init__(self, directory: str, *, image_size: int, placement: str = "auto",
               pca_lighting_std: float = 0.1, eval_crops: int = 1, threads: int | None = None,
               transfers: int = 4):
    """`placement`: where the run asks the set to go (PLACEMENTS); `threads`: the host threads
    that gather batches (placement host; default one per core); `transfers`: the host→device
    transfers in flight."""
    if placement not in PLACEMENTS:
      raise UserError(f"decoded_placement {placement!r} is not one of {', '.join(PLACEMENTS)}.")
    self.directory = directory
    self.manifest = Manifest.read(directory)
    self.name = f"decoded:{directory}"
    size = self.manifest.size
    if image_size > size:
      needed = imagenet_stats.resize_size(image_size)
      needed += needed % 2  # YUV 4:2:0, the default colour, halves the size: an even one.
      raise UserError(f"image_size {image_size} is larger than the {size}² images decoded in "
                      f"{directory!r}; prepare them with --size={needed} or train at most at "
                      f"{size}.")
    self.image_size, self.pca_stddev, self.eval_crops = image_size, pca_lighting_std, eval_crops
    self.asked = placement
    self.placement = None  # the run's Placement (`placed`)
    self.threads = threads or os.cpu_count()
    self.transfers = transfers
    self.num_classes = self.manifest.num_classes
    self.channels = 3
    self.num_train = self.manifest.examples["train"]
    self.num_eval = self.manifest.examples["eval"]
    self.mean, self.std = self.manifest.mean, self.manifest.std
    self.train_labels = self.manifest.labels(directory, "train")
    self.eval_labels = self.manifest.labels(directory, "eval")

  @property
  def set_bytes(self) -> int:
    return self.num_train * self.manifest.bytes_per_image

  def rows_per_device(self, data: int) -> int:
    """The rows each device holds of a set split over `data` shards (the last padded)."""
    return -(-self.num_train // data)

  def share_bytes(self, data: int) -> int:
    """Each device's share of the set split over `data` data shards."""
    return self.rows_per_device(data) * self.manifest.bytes_per_image

  def decide(self, *, data: int, platform: str, budget: int | None) -> Placement:
    """`decide` for this set on a mesh of `data` data shards."""
    return decide(self.asked, set_bytes=self.set_bytes, data=data, platform=platform,
                  share_bytes=self.share_bytes(data), budget=budget, directory=self.directory,
                  colour=self.manifest.colour)

  def placed(self, placement: Placement) -> "DecodedDataset":
    """This set, to be read where `placement` says."""
    placed = copy.copy(self)
    placed.placement = placement
    return placed

  def _where(self) -> str:
    if self.placement is None:
      raise RuntimeError("decide where the set goes first (experiment.feed: placed).")
    return self.placement.where

  # --- the source interface (source.py) ---------------------------------------------------------

  def train_batches(self, global_batch: int, *, seed: int, position: int, shard: slice):
    """Yields this process's rows (`shard` of each global batch) from step `position` on: their
    row numbers where the whole set is on every device; where it is split, each position's row
    with its place in the exchange (exchange.plan: the plan of the whole batch, computed on
    every process alike); else the rows gathered from the file."""
    where = self._where()

    def rows_of(step):
      return arrays.batch_indices(self.num_train, global_batch, seed=seed, step=step)

    if where == WHOLE:
      for step in itertools.count(position):
        rows = rows_of(step)[shard]
        yield rows.astype(np.int32), self.train_labels[rows], step + 1
    elif where == SPLIT:
      data = self.placement.data
      capacity = exchange.capacity(global_batch, data)
      for step in itertools.count(position):
        rows = rows_of(step)
        plan = exchange.plan(rows, rows_per_device=self.rows_per_device(data), data=data,
                             capacity=capacity)
        yield plan[shard], self.train_labels[rows[shard]], step + 1
    else:
      images = self.manifest.images(self.directory, "train")

      def gather(step):
        rows = rows_of(step)[shard]
        return np.take(images, rows, axis=0), self.train_labels[rows], step + 1

      yield from ordered_map(gather, itertools.count(position), threads=self.threads,
                             ahead=2 * self.threads)

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
    return self.transfers if self._where() == HOST else 1

  def device_input(self, sharding, *, seed: int, dtype=jnp.float32,
                   place: bool = True) -> DeviceInput:
    """What finishes a batch on the devices of `sharding` (placing the training set there first,
    where the Placement says so, unless not to `place` it: see source.Source): train takes the
    row numbers (the whole set on every device), the exchange's plan (split) or the gathered
    rows (host), eval the gathered rows; each crop's window is cut from a row, in RGB, and
    finished as device_augment does the prepared JPEGs."""
    size = self.manifest.size
    window = functools.partial(row_window, colour=self.manifest.colour, stored=size)
    train, evaluate = device_augment.finishes(
        sharding, seed=seed, image_size=self.image_size, stored=(size, size),
        pca_stddev=self.pca_stddev, mean=self.mean, std=self.std, crops=self.eval_crops,
        window=window, dtype=dtype)
    where, mesh = self._where(), sharding.mesh
    if where == HOST:
      def nothing_held():  # "placing" it says where it is read.
        logging.info("decoded set %s: read on the host (%s).", self.directory,
                     self.placement.why)
        return ()

      return DeviceInput(train=lambda held, rows, step: train(rows, step), evaluate=evaluate,
                         held=nothing_held() if place else (),
                         read=None if place else nothing_held)
    if where == WHOLE:
      lies = NamedSharding(mesh, PartitionSpec())  # how the set lies on the devices
      gather = lambda x, rows: device_augment.gather_rows(x, rows, sharding)
    else:
      lies = NamedSharding(mesh, PartitionSpec(exchange.DATA))
      rows_per_device = self.rows_per_device(self.placement.data)
      everywhere = NamedSharding(mesh, PartitionSpec())

      def gather(x, plan):
        rows = exchange.exchange(x, device_augment.lay_out(plan, everywhere), mesh=mesh,
                                 rows_per_device=rows_per_device,
                                 capacity=exchange.capacity(plan.shape[0], mesh.shape["data"]))
        return device_augment.lay_out(rows, sharding)

    return DeviceInput.holding(self._held_shape(lies), lambda: self._read_onto(lies),
                               place=place, evaluate=evaluate,
                               train=lambda x, inputs, step: train(gather(x, inputs), step))

  def _held_shape(self, sharding: NamedSharding) -> jax.ShapeDtypeStruct:
    """The training rows as `_read_onto` lays them out: padded to a multiple of the row shards."""
    shards = sharding.mesh.shape["data"] if sharding.spec else 1
    return jax.ShapeDtypeStruct((self.rows_per_device(shards) * shards,
                                 self.manifest.bytes_per_image), np.uint8, sharding=sharding)

  def _read_onto(self, sharding: NamedSharding):
    """The training rows on the devices of `sharding`'s mesh, laid out as `sharding` says (rows
    padded to a multiple of its row shards), placed now, saying so; each process reads only its
    devices' rows, straight from the mapped file."""
    images = self.manifest.images(self.directory, "train")
    shards = sharding.mesh.shape["data"] if sharding.spec else 1
    rows = self._held_shape(sharding).shape[0]
    start_s = time.perf_counter()

    def read(index):
      start, stop, _ = index[0].indices(rows)
      if stop <= self.num_train:
        return images[start:stop]  # straight from the mapped file: no copy of the set here
      block = np.zeros((stop - start, images.shape[1]), np.uint8)  # the last share, padded
      block[:max(0, self.num_train - start)] = images[start:self.num_train]
      return block

    placed = jax.block_until_ready(
        jax.make_array_from_callback((rows, images.shape[1]), sharding, read))
    devices = sharding.mesh.devices.size
    each = rows * images.shape[1] // shards
    logging.info("decoded set %s: %s placed on %d %s %s, %s, in %.1f s (%s).",
                 self.directory, size_text(self.set_bytes), devices,
                 sharding.mesh.devices.flat[0].platform.upper(),
                 "device" if devices == 1 else "devices",
                 "a whole copy on each" if shards == 1 else
                 f"split over {shards} data shards, {size_text(each)} each",
                 time.perf_counter() - start_s, self.placement.why)
    return placed
