"""In-memory datasets: small arrays held on every host.

Datasets (`name`):
  digits      the 1,797 8×8 handwritten digits that ship with scikit-learn (no download), split
              into 1,437 train / 360 test images by a fixed stratified split (digits_split.npz:
              scikit-learn's `train_test_split(stratify=labels, random_state=0)`, stored
              because importing scikit-learn takes a second in every process that loads digits;
              tests/input_pipeline_test.py checks that scikit-learn still makes it).
  synthetic   deterministic random images and labels (for throughput; nothing to learn).
  npz:PATH    a local .npz with uint8 NHWC `x_train`, `x_test` and integer `y_train`, `y_test`.

Every dataset is held as uint8 NHWC at the model's input size (resized once, at load), on every
process, and normalised with the training set's per-channel mean and std on the devices. The
training images are copied to every device once, before the first step, and a training batch
leaves the host as its row numbers: the step's program gathers and normalises the rows. (Copying
each batch's images from the host instead held the trainer to a third of the bare step's rate on
an H100 — 22,000 images/s of 224² against 64,000-80,000, the gather and the host-to-device copy
of 150 KB per image — and normalising them in NumPy was slower still.) Evaluation batches leave
the host as uint8 images. There is no augmentation (the tfds datasets of tfds_source.py have it).
One copy per device is the price: these are the small, in-memory sets (digits, synthetic images,
a local .npz), the prepared and tfds sources stream.

Order: the global batch of step s is a pure function of (seed, s) — a fresh permutation of the
training set per epoch, cut into `global_batch` slices (the remainder of an epoch is dropped).
So every scheme, mesh and restart sees the same batches at the same steps.
"""

import dataclasses
import functools
import itertools
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from hybrid_parallel.errors import UserError
from input_pipeline.device_augment import gather_rows, lay_out, normalise
from input_pipeline.source import DeviceInput, StepPositioned

DIGITS_TEST_EXAMPLES = 360
DIGITS_SPLIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "digits_split.npz")


@dataclasses.dataclass
class Dataset(StepPositioned):
  """A dataset held in host memory, uint8 NHWC at the model's input size."""
  name: str
  x_train: np.ndarray
  y_train: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray
  num_classes: int
  mean: np.ndarray  # per-channel, of the training images, in [0, 255]
  std: np.ndarray
  # [steps, blocks]: the step whose global batch each equal block of rows (one a data-parallel
  # device) takes at each step; None: the step's own (A-SGD's asgd_data_order: a drawn run's
  # data order for lock-step clients, hybrid_parallel/local_sgd/asgd.data_steps).
  block_steps: np.ndarray | None = None

  @property
  def channels(self) -> int:
    return self.x_train.shape[-1]

  @property
  def num_train(self) -> int:
    return len(self.x_train)

  @property
  def scale(self) -> np.ndarray:
    """1 / std, per channel, in float32."""
    return np.float32(1.0) / self.std

  def normalise(self, x_uint8: np.ndarray) -> np.ndarray:
    return normalise(x_uint8, self.mean, self.scale)

  def probe(self, examples: int) -> "Dataset":
    """The same set with its first `examples` training images as the evaluation split: the
    fixed subset whose loss train.py's `probe_examples` follows step by step."""
    return dataclasses.replace(self, x_test=self.x_train[:examples],
                               y_test=self.y_train[:examples])

  # --- the source interface (source.py) ---------------------------------------------------------

  def train_batches(self, global_batch: int, *, seed: int, position: int, shard: slice):
    """Yields this process's rows (`shard` of each global batch) from step `position` on: their
    row numbers in the training set (the devices hold its images: device_input) and
    labels."""
    for step in itertools.count(position):
      rows = self.batch_rows(global_batch, seed=seed, step=step)[shard]
      yield rows.astype(np.int32), self.y_train[rows], step + 1

  def batch_rows(self, global_batch: int, *, seed: int, step: int) -> np.ndarray:
    """The training rows of the global batch of `step` (0-based): `train_indices`, or with
    `block_steps` each block's rows of the batch of its own step."""
    if self.block_steps is None:
      return train_indices(self, global_batch, seed=seed, step=step)
    if step >= len(self.block_steps):
      raise ValueError(f"block_steps covers {len(self.block_steps)} steps, not step {step}.")
    blocks = self.block_steps[step]
    size = global_batch // len(blocks)
    return np.concatenate([train_indices(self, global_batch, seed=seed, step=int(s))[
        b * size:(b + 1) * size] for b, s in enumerate(blocks)])

  def eval_batches(self, batch: int, shard: slice):
    """Yields (images, labels, weights); the last batch is padded with weight-0 repeats."""
    n = len(self.x_test)
    for start in range(0, n, batch):
      idx = np.arange(start, start + batch)
      weights = (idx < n).astype(np.float32)
      idx = np.minimum(idx, n - 1)[shard]
      yield self.x_test[idx], self.y_test[idx], weights[shard]

  def device_input(self, sharding, *, seed: int, dtype=jnp.float32,
                   place: bool = True) -> DeviceInput:
    """Copies the training images to every device of `sharding`'s mesh (now), and finishes a
    training batch by gathering its rows from them and normalising; an evaluation batch arrives
    as uint8 images and is normalised (`place`: see source.Source)."""
    del seed
    mean, scale = self.mean, self.scale  # once, not per batch.
    evaluate = lambda images: normalise(lay_out(images, sharding), mean, scale).astype(dtype)
    everywhere = NamedSharding(sharding.mesh, PartitionSpec())
    # Every process holds the whole set, so each supplies its own devices' copies.
    read = lambda: jax.make_array_from_callback(self.x_train.shape, everywhere,
                                                lambda index: self.x_train[index])
    return DeviceInput.holding(
        jax.ShapeDtypeStruct(self.x_train.shape, self.x_train.dtype, sharding=everywhere), read,
        place=place, evaluate=evaluate,
        train=lambda x, rows, step: normalise(gather_rows(x, rows, sharding), mean,
                                              scale).astype(dtype))


def _resize(x: np.ndarray, size: int) -> np.ndarray:
  """Bilinear resize of uint8 NHWC images to size×size (no-op when already that size)."""
  if x.shape[1:3] == (size, size):
    return x
  resized = jax.device_get(jax.image.resize(x.astype(np.float32), (x.shape[0], size, size,
                                                                    x.shape[3]), "bilinear"))
  return np.clip(np.rint(resized), 0, 255).astype(np.uint8)


def digits_file() -> str:
  """scikit-learn's digits.csv.gz (8×8 images as 64 values 0..16, then the label), found without
  importing scikit-learn."""
  import importlib.util
  spec = importlib.util.find_spec("sklearn")
  if spec is None or not spec.submodule_search_locations:
    raise UserError("the digits dataset ships with scikit-learn, which is not installed "
                    "(pip install -r requirements.txt).")
  return os.path.join(spec.submodule_search_locations[0], "datasets", "data", "digits.csv.gz")


def _digits():
  data = np.loadtxt(digits_file(), delimiter=",")  # as sklearn.datasets.load_digits reads it.
  images, labels = data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(np.int32)
  # Pixel values are 0..16; scale to the uint8 range every other dataset uses.
  x = np.rint(images * (255.0 / 16.0)).astype(np.uint8)[..., None]
  with np.load(DIGITS_SPLIT) as split:
    train, test = split["train"], split["test"]
  return x[train], labels[train], x[test], labels[test]


def _synthetic(size: int, *, seed: int, examples: int, classes: int):
  rng = np.random.default_rng(seed)
  n_train, n_test = examples, max(1, examples // 8)
  x = rng.integers(0, 256, (n_train + n_test, size, size, 3), dtype=np.uint8)
  y = rng.integers(0, classes, n_train + n_test).astype(np.int32)
  return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def _npz(path: str):
  """The arrays of an npz file (whose presence input_pipeline.check_name checked)."""
  try:
    with np.load(path) as f:
      arrays = {k: f[k] for k in f.files}
  except Exception as e:  # np.load raises several unrelated types for a bad file.
    raise UserError(f"dataset file {path!r} is not a readable .npz file ({e}).") from None
  missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in arrays]
  if missing:
    raise UserError(f"dataset file {path!r} lacks the array(s) {', '.join(missing)}; it needs "
                    f"x_train, y_train, x_test and y_test.")
  for split in ("train", "test"):
    x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
    if x.dtype != np.uint8 or x.ndim != 4 or x.shape[1] != x.shape[2] or x.shape[3] not in (1, 3):
      raise UserError(f"dataset file {path!r}: x_{split} must be uint8 images of shape "
                      f"(N, H, H, 1 or 3), got {x.dtype} {x.shape}.")
    if not np.issubdtype(y.dtype, np.integer) or y.shape != (x.shape[0],):
      raise UserError(f"dataset file {path!r}: y_{split} must hold one integer label per image "
                      f"({x.shape[0]}), got {y.dtype} {y.shape}.")
    if y.size and y.min() < 0:
      raise UserError(f"dataset file {path!r}: y_{split} holds negative labels.")
  return (arrays["x_train"], arrays["y_train"].astype(np.int32), arrays["x_test"],
          arrays["y_test"].astype(np.int32))


NAMES = ("digits", "synthetic", "npz:PATH")


def is_array_dataset(name: str) -> bool:
  return name in ("digits", "synthetic") or name.startswith("npz:")


def load(name: str, *, image_size: int, seed: int = 0, synthetic_examples: int = 1024,
         synthetic_classes: int = 10) -> Dataset:
  """Loads dataset `name` at `image_size`; one clear UserError if it cannot.

  `seed`, `synthetic_examples` and `synthetic_classes` make the synthetic set.
  """
  if name == "digits":
    x_train, y_train, x_test, y_test = _digits()
  elif name == "synthetic":
    x_train, y_train, x_test, y_test = _synthetic(image_size, seed=seed,
                                                  examples=synthetic_examples,
                                                  classes=synthetic_classes)
  elif name.startswith("npz:"):
    x_train, y_train, x_test, y_test = _npz(name[len("npz:"):])
  else:
    raise ValueError(f"not an in-memory dataset: {name!r}")
  x_train, x_test = _resize(x_train, image_size), _resize(x_test, image_size)
  num_classes = int(max(y_train.max(initial=0), y_test.max(initial=0))) + 1
  if name == "synthetic":
    num_classes = synthetic_classes
  mean = x_train.mean(axis=(0, 1, 2)).astype(np.float32)
  std = np.maximum(x_train.std(axis=(0, 1, 2)), 1.0).astype(np.float32)
  return Dataset(name, x_train, y_train, x_test, y_test, num_classes, mean, std)


@functools.lru_cache(maxsize=2)
def _epoch_order(num_examples: int, seed: int, epoch: int) -> np.ndarray:
  """The shuffled order of one epoch; cached so that it is drawn once per epoch, not per step."""
  order = np.random.default_rng([seed, epoch]).permutation(num_examples)
  order.flags.writeable = False  # shared between the steps of the epoch
  return order


def batch_indices(num_examples: int, global_batch: int, *, seed: int, step: int) -> np.ndarray:
  """Indices of the global batch of `step` (0-based) among `num_examples` training examples: the
  step's slice of epoch e's permutation; a pure function of its arguments (also prepared.py's)."""
  epoch, position = divmod(step, num_examples // global_batch)
  order = _epoch_order(num_examples, seed, epoch)
  return order[position * global_batch:(position + 1) * global_batch]


def train_indices(dataset: Dataset, global_batch: int, *, seed: int, step: int) -> np.ndarray:
  """Training-set indices of the global batch of `step` (0-based): a pure function of its args."""
  return batch_indices(len(dataset.x_train), global_batch, seed=seed, step=step)
