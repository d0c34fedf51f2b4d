"""Datasets → this process's host batches → global jax.Arrays on the mesh, one batch ahead.

`load(name, ...)` names a source:
  digits, synthetic, npz:PATH       small arrays held on every process (arrays.py)
  prepared:DIR                      a dataset prepared once (python -m input_pipeline.prepare),
                                    decoded on every host core, augmented on the devices
                                    (prepared.py, device_augment.py)
  decoded:DIR                       a dataset decoded once (prepare --format=decoded), held in
                                    device memory where it fits, else gathered from its
                                    memory-mapped file on host threads (decoded.py): the fast
                                    ImageNet path
  imagenet2012, imagenette/320px-v2,
  cifar10, cifar100, mnist,
  fashion_mnist                     TensorFlow Datasets, augmented, sharded (tfds_source.py)

Every source implements one interface (source.py). It yields, for this process's rows of every
global batch, (images, labels, position): NHWC images (float32 from tfds; uint8 from the
prepared sources; row numbers of the training images the devices hold, from the in-memory ones
and a decoded set on the devices — finished on the devices, inside the step's own program, by
the source's `device_input`),
int32 labels and the *position* after the batch — what a checkpoint stores so that a restart
continues with the next batch (for the array and prepared sources, the step number; for tfds,
every input shard's stream position). The global batch of a step depends only on the seed and
the position: not on the mesh, the scheme or (for tfds, with input_shards a multiple of it) the
number of processes.

`train_iterator` turns the host batches into global arrays with the batch sharding
(`jax.make_array_from_process_local_data`) on a background thread that runs `prefetch` batches
ahead, so that reading, copying and transfers overlap the steps instead of waiting between them.
"""

import contextlib
import os
import queue
import threading

import jax
import numpy as np
from absl import logging
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding

from hybrid_parallel import checks
from hybrid_parallel.errors import UserError
from input_pipeline import arrays, prepared
from input_pipeline.arrays import Dataset, train_indices  # noqa: F401  (in-memory source)

TFDS_NAMES = ("imagenet2012", "imagenette/320px-v2", "cifar10", "cifar100", "mnist",
              "fashion_mnist")
IMAGENET_STYLE = ("imagenet2012", "imagenette/320px-v2")  # ten-crop evaluation applies to these.
PREPARED = "prepared:"
DECODED = "decoded:"
# Where a decoded set goes: the devices where it fits, else the host (auto), or one forced
# (split: on the devices, split over the data axis even where a whole copy fits).
DECODED_PLACEMENTS = ("auto", "devices", "split", "host")
EVAL_CROPS = (1, 10)  # the centre crop, or Krizhevsky's ten crops with their softmaxes averaged.


def check_name(field: str, name) -> None:
  """One UserError unless `name` names a source (and an npz file that exists). A prepared
  directory is checked when it is opened (`load`, before anything is written): a config may name
  where it will be."""
  names = arrays.NAMES + TFDS_NAMES + (PREPARED + "DIR", DECODED + "DIR")
  if not isinstance(name, str) or not (arrays.is_array_dataset(name) or name in TFDS_NAMES or
                                       name.startswith((PREPARED, DECODED))):
    raise UserError(f"unknown {field} {name!r}; choose one of {', '.join(names)}.")
  if name in (PREPARED, DECODED):
    raise UserError(f"{field} {name!r} names no directory; write {name}DIR.")
  path = name[len("npz:"):] if name.startswith("npz:") else None
  if path == "":
    raise UserError(f"{field} {name!r} names no file; write npz:PATH.")
  if path and not os.path.isfile(path):
    raise UserError(f"dataset file {path!r} does not exist.")


def check_eval_crops(name: str, eval_crops: int) -> None:
  """One UserError unless dataset `name` can be evaluated on `eval_crops` crops (ten: the
  ImageNet-style sources only; the others are evaluated whole)."""
  checks.one_of(EVAL_CROPS)("eval_crops", eval_crops)
  if eval_crops != 1 and not (name.startswith((PREPARED, DECODED)) or name in IMAGENET_STYLE):
    raise UserError(f"eval_crops = {eval_crops} is ImageNet-style evaluation; dataset {name!r} "
                    f"is evaluated whole (use eval_crops = 1).")


def check_decoded_placement(name: str, placement: str, *, data: int) -> None:
  """One UserError where a decoded set (dataset `name`) is to be split over the data axis of a
  mesh that has `data` < 2 shards: refused when the config is resolved, before the set is opened
  or any program compiled (decoded.decide holds the same rule for a source made directly)."""
  if name.startswith(DECODED) and placement == "split" and data < 2:
    raise UserError(
        f"decoded_placement 'split' shares the set's rows over the mesh's data axis, and this "
        f"mesh has {data} data shard: use decoded_placement = 'devices' (a whole copy on each "
        f"device), 'host' or 'auto'.")


def check_input_shards(shards: int, *, processes: int, **batches: int) -> None:
  """One UserError unless the processes can share `shards` input shards (a tfds source's) evenly
  and each batch ({its field: its size}) cuts into them evenly."""
  if shards % processes:
    raise UserError(f"input_shards {shards} cannot be split evenly over {processes} processes; "
                    f"use a multiple of {processes}.")
  for what, size in batches.items():
    if size % shards:
      raise UserError(f"{what} {size} cannot be cut into {shards} input shards; use a multiple "
                      f"of input_shards.")


def load(name: str, *, image_size: int, seed: int = 0, synthetic_examples: int = 1024,
         synthetic_classes: int = 10, data_dir: str | None = None, download: bool = True,
         input_shards: int = 8, shuffle_buffer: int = 2048, pca_lighting_std: float = 0.1,
         eval_crops: int = 1, input_workers: int = 0, decoded_placement: str = "auto"):
  """The source `name` at `image_size`; one clear UserError if it cannot be had.

  `seed`, `synthetic_examples`, `synthetic_classes`: the synthetic set (arrays.py);
  `input_workers`: the prepared source's decoding processes (0: threads of this one);
  `decoded_placement`: where a decoded set goes (decoded.PLACEMENTS); the rest: the tfds datasets
  (tfds_source.py, configs/default.py).
  """
  check_name("dataset", name)
  check_eval_crops(name, eval_crops)
  if name.startswith(DECODED):
    from input_pipeline import decoded
    return decoded.DecodedDataset(name[len(DECODED):], image_size=image_size,
                                  placement=decoded_placement,
                                  pca_lighting_std=pca_lighting_std, eval_crops=eval_crops)
  if name.startswith(PREPARED):
    return prepared.PreparedDataset(name[len(PREPARED):], image_size=image_size,
                                    workers=input_workers, pca_lighting_std=pca_lighting_std,
                                    eval_crops=eval_crops)
  if arrays.is_array_dataset(name):
    return arrays.load(name, image_size=image_size, seed=seed,
                       synthetic_examples=synthetic_examples,
                       synthetic_classes=synthetic_classes)
  try:  # TensorFlow loads only for the datasets that need it.
    from input_pipeline import tfds_source
  except ModuleNotFoundError as e:
    if e.name not in ("tensorflow", "tensorflow_datasets"):
      raise
    raise UserError(f"dataset {name!r} is read by tensorflow-datasets, and {e.name} is not "
                    f"installed here: install the imagenet extra (pip install -r "
                    f"requirements-imagenet.txt, or pip install \".[imagenet]\"), or prepare the "
                    f"dataset where TensorFlow is (python -m input_pipeline.prepare) and train on "
                    f"{PREPARED}DIR.") from None
  return tfds_source.TfdsDataset(name, image_size=image_size, data_dir=data_dir,
                                 download=download, input_shards=input_shards,
                                 shuffle_buffer=shuffle_buffer,
                                 pca_lighting_std=pca_lighting_std, eval_crops=eval_crops)


def steps_per_epoch(source, global_batch: int) -> int:
  """Full global batches in one pass over the training set; at least one, or a UserError."""
  steps = source.num_train // global_batch
  if steps < 1:
    raise UserError(f"global_batch_size {global_batch} is larger than the {source.num_train} "
                    f"training examples of {source.name}.")
  return steps


def process_rows(sharding: NamedSharding, global_batch: int) -> slice:
  """The rows of a global batch that this process's devices hold under the batch `sharding`.

  batch / process_count of them when the "data" axis alone crosses processes; more when the
  "model" axis crosses them too (one GPU per host running hybrid or owt): the devices of one data
  shard then sit on several hosts, and each of those hosts must feed its device that shard's rows.

  Raises:
    UserError: if this process's rows are not contiguous (a mesh whose data shards interleave
      processes), which no source here can read.
  """
  rows = sorted({index[0].indices(global_batch)[:2] for index in
                 sharding.addressable_devices_indices_map((global_batch,)).values()})
  start, stop = rows[0][0], rows[0][1]
  for row_start, row_stop in rows[1:]:
    if row_start > stop:
      raise UserError(f"process {jax.process_index()} holds rows {rows} of the global batch: not "
                      f"one contiguous range; order the mesh so each process's data shards are "
                      f"neighbours.")
    stop = max(stop, row_stop)
  return slice(start, stop)


def to_global(sharding: NamedSharding, *host_arrays: np.ndarray, global_batch: int,
              staged: bool = False):
  """Assembles this process's rows of each array into global arrays with `sharding`; `staged`:
  through pinned host memory first, where the devices have it (a GPU's DMA engine reads pinned
  memory directly, without the driver's copy into a staging buffer; the CPU backend has no pinned
  memory, and there `staged` changes nothing)."""
  made = []
  for a in host_arrays:
    shape = (global_batch,) + a.shape[1:]
    if staged and _has_pinned_host(sharding):
      try:
        on_host = jax.make_array_from_process_local_data(
            sharding.with_memory_kind("pinned_host"), a, shape)
        made.append(jax.device_put(on_host, sharding))
        continue
      except Exception as e:  # noqa: BLE001 — a backend that lists the memory but refuses it
        _NO_PINNED_HOST.add(sharding.mesh.devices.flat[0].platform)
        logging.warning("transfers go unstaged: pinned host memory was refused (%s)", e)
    made.append(jax.make_array_from_process_local_data(sharding, a, shape))
  return tuple(made)


_NO_PINNED_HOST = set()  # platforms whose pinned host memory was refused once.


def _has_pinned_host(sharding: NamedSharding) -> bool:
  device = next(iter(sharding.addressable_devices))
  if device.platform == "cpu" or device.platform in _NO_PINNED_HOST:
    return False
  try:
    return "pinned_host" in {memory.kind for memory in device.addressable_memories()}
  except (AttributeError, NotImplementedError):  # a backend without memory kinds
    return False


def start_position(source, step: int, global_batch: int, *, saved=None):
  """The position to resume from at `step`: the checkpoint's (`saved`) where it is one this source
  reads (a tfds source given a checkpoint that recorded only its step derives its position from
  the step, which is exact as long as no image was ever skipped)."""
  if saved is None or isinstance(saved, int) != source.positions_are_steps:
    return source.position_at(step, global_batch)
  return saved


def batch_shapes(source, sharding: NamedSharding, global_batch: int, *, seed: int):
  """(inputs, labels) of a training batch as `train_iterator` lays them out, shapes only
  (jax.ShapeDtypeStruct): read off the host batch of step 0 (row numbers, for the sources that
  keep their set on the devices: nothing is read from disk)."""
  host = source.train_batches(global_batch, seed=seed,
                              position=source.position_at(0, global_batch),
                              shard=process_rows(sharding, global_batch))
  try:
    first = next(host)[:2]
  finally:
    host.close()
  return tuple(jax.ShapeDtypeStruct((global_batch,) + a.shape[1:], a.dtype, sharding=sharding)
               for a in first)


def train_iterator(source, sharding: NamedSharding, global_batch: int, *, seed: int, position,
                   prefetch: int = 2):
  """Yields (inputs, labels, position) of consecutive steps as global arrays laid out as
  `sharding`: the inputs are what the source's `device_input` finishes inside the step.

  A background thread reads the host batches and starts their transfers up to `prefetch` batches
  ahead of the step that takes them (transfers, not computations: they add no step in flight); a
  source whose batches are images of a size worth it (`transfer_threads` > 1: the prepared
  images, the decoded set gathered on the host) has that many transfers in flight at once,
  staged in pinned host memory. The batches and positions are those of the host iterator, in
  its order: reading ahead changes nothing a checkpoint records. A source that places data on
  the devices has done so in its `device_input`, before this is called.
  """
  host = source.train_batches(global_batch, seed=seed, position=position,
                              shard=process_rows(sharding, global_batch))
  transfers = getattr(source, "transfer_threads", 1)

  def transfer(batch):
    images, labels, next_position = batch
    return (*to_global(sharding, images, labels, global_batch=global_batch,
                       staged=transfers > 1), next_position)

  if transfers > 1:
    from input_pipeline.decoded import ordered_map
    on_device = ordered_map(transfer, host, threads=transfers, ahead=transfers)
  else:
    on_device = (transfer(batch) for batch in host)
  # Closed in this order: the producer thread stops, then the source (its worker processes).
  with (contextlib.closing(host), contextlib.closing(on_device),
        contextlib.closing(in_background(on_device, depth=prefetch)) as ready):
    yield from ready


_END = object()  # what the producer puts after the last item.
_JOIN_TIMEOUT_S = 60.0  # a source blocked longer than this is left to the daemon thread's fate.


def in_background(items, *, depth: int):
  """Yields the items of the iterator `items`, produced by a daemon thread that runs at most
  `depth` items ahead. An exception in the producer is raised here, at the item it replaced.
  Closing this generator stops the producer and waits for it (it may be inside a JAX transfer,
  which must not outlive the interpreter)."""
  ready = queue.Queue(maxsize=depth)
  stop = threading.Event()

  def offer(item) -> bool:
    """Puts `item` when there is room; False once the consumer has stopped."""
    while not stop.is_set():
      try:
        ready.put(item, timeout=0.1)
        return True
      except queue.Full:
        continue
    return False

  def produce():
    try:
      for item in items:
        if not offer(item):
          return
      offer(_END)
    except BaseException as e:  # noqa: BLE001 — handed to the consumer, raised there.
      offer(e)

  producer = threading.Thread(target=produce, name="input_pipeline", daemon=True)
  producer.start()
  try:
    while (item := ready.get()) is not _END:
      if isinstance(item, BaseException):
        raise item
      yield item
  finally:
    stop.set()
    producer.join(timeout=_JOIN_TIMEOUT_S)


def eval_batches(source, sharding: NamedSharding, batch: int):
  """Yields (inputs, labels, weights) over the evaluation split as global arrays (the inputs
  finished by the source's `device_input`, inside the eval step); padding images have weight
  0."""
  for host_batch in source.eval_batches(batch, process_rows(sharding, batch)):
    yield to_global(sharding, *host_batch, global_batch=batch)


def agreed_minimum(value: int | None) -> int | None:
  """The smallest of every process's `value` (None, a value unknown, wins): what one process
  read from its own devices, made the same decision everywhere."""
  if jax.process_count() == 1:
    return value
  everyone = multihost_utils.process_allgather(np.int64(-1 if value is None else value))
  return None if np.any(everyone < 0) else int(np.min(everyone))


# What a process reads of a source from its own files or metadata, and all must agree on.
_AGREED = ("num_train", "num_eval", "num_classes", "channels")


def check_same_everywhere(source) -> None:
  """One UserError unless every process read the same sizes of `source` (its counts of images
  and classes): processes that disagree would run different programs, or the same program on
  different rows, and hang or silently differ."""
  if jax.process_count() == 1:
    return
  names = [name for name in _AGREED if hasattr(source, name)]
  mine = np.array([getattr(source, name) for name in names], np.int64)
  everyone = multihost_utils.process_allgather(mine)
  for i, name in enumerate(names):
    if len(set(everyone[:, i].tolist())) > 1:
      values = ", ".join(f"{v} on process {p}" for p, v in enumerate(everyone[:, i].tolist()))
      raise UserError(f"the processes read different copies of {source.name}: {name} is "
                      f"{values}; give every process the same files.")


def global_position(position):
  """Every shard's position, gathered from the processes that read them (the checkpoint writer
  knows only its own shards'). Positions that are a step number pass through."""
  if isinstance(position, int) or jax.process_count() == 1:
    return position
  # Every process started from the same positions, and a shard's entry moves only in the
  # processes that read it (one, or several when the model axis crosses processes): the largest
  # entry of each shard is its position.
  everyone = multihost_utils.process_allgather(np.asarray(position, np.int64))
  return [int(p) for p in np.max(everyone, axis=0)]
