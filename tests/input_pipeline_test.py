"""Datasets load as documented, batches follow (seed, step) only, bad files get one sentence."""

import itertools
import os
import tempfile
import threading
import time

import jax
import numpy as np
from absl.testing import absltest, parameterized
from jax.sharding import NamedSharding, PartitionSpec as P

import experiment
import input_pipeline
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel.errors import UserError
from tests import testing

_digits = {}


def digits():
  if not _digits:
    _digits["d"] = experiment.load_dataset(testing.resolved(dataset="digits"))
  return _digits["d"]


def write_npz(directory, **arrays):
  path = os.path.join(directory, "data.npz")
  np.savez(path, **arrays)
  return path


def valid_arrays(n_train=20, n_test=6, size=16, channels=3):
  rng = np.random.RandomState(0)
  return dict(x_train=rng.randint(0, 256, (n_train, size, size, channels)).astype(np.uint8),
              y_train=rng.randint(0, 4, n_train), x_test=rng.randint(
                  0, 256, (n_test, size, size, channels)).astype(np.uint8),
              y_test=np.arange(n_test) % 4)


class DigitsTest(absltest.TestCase):

  def test_fixed_stratified_split_at_the_model_size(self):
    d = digits()
    self.assertEqual(d.x_train.shape, (1437, 64, 64, 1))
    self.assertEqual(d.x_test.shape, (360, 64, 64, 1))
    self.assertEqual(d.x_train.dtype, np.uint8)
    self.assertEqual(d.num_classes, 10)
    # Stratified: each class keeps its share of the 1,797 images in the test set, within one.
    per_class = np.bincount(np.concatenate([d.y_train, d.y_test]))
    np.testing.assert_array_less(np.abs(np.bincount(d.y_test) - per_class * 360 / 1797), 1.0)
    self.assertGreater(d.x_train.max(), 200)  # 0..16 was scaled to the uint8 range.

  def test_the_stored_split_is_scikit_learns(self):
    # digits_split.npz stands in for importing scikit-learn in every process: the same images,
    # labels and order as load_digits + train_test_split(stratify, random_state=0).
    from sklearn import datasets, model_selection
    from input_pipeline import arrays
    sk = datasets.load_digits()
    images = np.rint(sk.images * (255.0 / 16.0)).astype(np.uint8)[..., None]
    x_train, x_test, y_train, y_test = model_selection.train_test_split(
        images, sk.target.astype(np.int32), test_size=arrays.DIGITS_TEST_EXAMPLES,
        stratify=sk.target, random_state=0)
    for ours, theirs in zip(arrays._digits(), (x_train, y_train, x_test, y_test)):
      self.assertEqual(ours.dtype, theirs.dtype)
      np.testing.assert_array_equal(ours, theirs)

  def test_normalised_batches_have_zero_mean_unit_std(self):
    d = digits()
    x = d.normalise(d.x_train)
    self.assertAlmostEqual(float(x.mean()), 0.0, places=3)
    self.assertAlmostEqual(float(x.std()), 1.0, places=3)


class OrderTest(absltest.TestCase):

  def test_batches_depend_on_seed_and_step_only(self):
    d = digits()
    first = input_pipeline.train_indices(d, 256, seed=0, step=7)
    np.testing.assert_array_equal(first, input_pipeline.train_indices(d, 256, seed=0, step=7))
    self.assertFalse(np.array_equal(first, input_pipeline.train_indices(d, 256, seed=1, step=7)))

  def test_an_epoch_visits_distinct_examples_and_reshuffles(self):
    d = digits()
    spe = input_pipeline.steps_per_epoch(d, 256)
    self.assertEqual(spe, 5)  # 1437 // 256; the remainder of each epoch is dropped.
    epoch0 = np.concatenate([input_pipeline.train_indices(d, 256, seed=0, step=s)
                             for s in range(spe)])
    self.assertLen(np.unique(epoch0), spe * 256)
    epoch1 = input_pipeline.train_indices(d, 256, seed=0, step=spe)
    self.assertFalse(np.array_equal(epoch0[:256], epoch1))

  def test_global_batch_arrives_sharded_in_mesh_order(self):
    d = digits()
    mesh = mesh_lib.make_mesh(2, 2)
    sharding = NamedSharding(mesh, P("data"))
    # Resuming at step 3: the iterator's first batch is step 3's, and its position is then 4.
    inputs, labels, position = next(input_pipeline.train_iterator(d, sharding, 8, seed=0,
                                                                  position=3))
    rows = input_pipeline.train_indices(d, 8, seed=0, step=3)
    self.assertEqual(position, 4)
    self.assertEqual(inputs.sharding, sharding)
    images = d.device_input(sharding, seed=0).finish_train(inputs, 3)
    self.assertTrue(images.sharding.is_equivalent_to(sharding, images.ndim))
    np.testing.assert_array_equal(jax.device_get(labels), d.y_train[rows])
    # Sent as row numbers, gathered from the devices' copy of the training images and
    # normalised there, to the same bits as on the host.
    host_rows, _, _ = next(d.train_batches(8, seed=0, position=3, shard=slice(0, 8)))
    np.testing.assert_array_equal(host_rows, rows)
    self.assertEqual(images.dtype, np.float32)
    np.testing.assert_array_equal(jax.device_get(images), d.normalise(d.x_train[rows]))

  def test_eval_batches_pad_the_last_batch_with_zero_weight(self):
    d = digits()
    sharding = NamedSharding(mesh_lib.make_mesh(1, 1), P())
    batches = list(input_pipeline.eval_batches(d, sharding, 100))
    self.assertLen(batches, 4)
    self.assertEqual(sum(float(w.sum()) for _, _, w in batches), 360)
    np.testing.assert_array_equal(jax.device_get(batches[-1][1])[:60], d.y_test[300:])


class Counted:
  """An endless iterator of 0, 1, 2, ... that says how many items were taken from it."""

  def __init__(self, fail_at: int | None = None):
    self.taken, self.fail_at = 0, fail_at

  def __iter__(self):
    for i in itertools.count():
      if i == self.fail_at:
        raise ValueError(f"item {i} is unreadable")
      self.taken += 1
      yield i


def _settles(read, expected, *, seconds: float = 30.0, hold: float = 0.5):
  """`read()` once it has reached `expected` (polled, for at most `seconds`: a thread starved by
  a loaded machine gets there late, not never) and then `hold` seconds later: the value it rests
  at, which a test compares with `expected` (a bound that was overrun shows as a larger value)."""
  deadline = time.monotonic() + seconds
  while read() != expected and time.monotonic() < deadline:
    time.sleep(0.02)
  time.sleep(hold)
  return read()


class BackgroundTest(absltest.TestCase):

  def test_yields_every_item_in_order(self):
    self.assertEqual(list(input_pipeline.in_background(iter(range(50)), depth=2)), list(range(50)))

  def test_runs_a_bounded_number_of_items_ahead(self):
    source = Counted()
    items = input_pipeline.in_background(iter(source), depth=3)
    self.assertEqual(next(items), 0)
    # 1 taken, 3 waiting in the queue, 1 in the producer's hand waiting for room.
    self.assertEqual(_settles(lambda: source.taken, 5), 5)
    self.assertEqual([next(items) for _ in range(4)], [1, 2, 3, 4])

  def test_closing_stops_the_producer(self):
    source = Counted()
    items = input_pipeline.in_background(iter(source), depth=2)
    next(items)
    # Closed once the producer is full (1 taken + 2 queued + 1 in hand), it takes no more.
    self.assertEqual(_settles(lambda: source.taken, 4), 4)
    items.close()
    self.assertEqual(_settles(lambda: source.taken, 4), 4)
    producers = lambda: sum(t.name == "input_pipeline" for t in threading.enumerate())
    self.assertEqual(_settles(producers, 0), 0)

  def test_a_producer_error_is_raised_where_its_item_was_due(self):
    items = input_pipeline.in_background(iter(Counted(fail_at=3)), depth=2)
    self.assertEqual([next(items) for _ in range(3)], [0, 1, 2])
    with self.assertRaisesRegex(ValueError, "item 3 is unreadable"):
      next(items)


class NpzTest(parameterized.TestCase):

  def test_valid_file_loads_resized(self):
    with tempfile.TemporaryDirectory() as tmp:
      path = write_npz(tmp, **valid_arrays())
      d = experiment.load_dataset(testing.resolved(dataset=f"npz:{path}"))
    self.assertEqual(d.x_train.shape, (20, 64, 64, 3))
    self.assertEqual(d.num_classes, 4)

  @parameterized.named_parameters(
      ("missing_key", dict(drop="y_test"), "lacks the array\\(s\\) y_test"),
      ("float_images", dict(x_train=np.zeros((20, 16, 16, 3), np.float32)),
       "x_train must be uint8 images"),
      ("label_count", dict(y_test=np.zeros(5, np.int64)), "y_test must hold one integer label "
       "per image \\(6\\)"),
      ("negative_labels", dict(y_train=-np.ones(20, np.int64)), "y_train holds negative labels"),
  )
  def test_malformed_contents(self, change, message):
    arrays = valid_arrays()
    arrays.pop(change.pop("drop", None), None)
    arrays.update(change)
    with tempfile.TemporaryDirectory() as tmp:
      path = write_npz(tmp, **arrays)
      with self.assertRaisesRegex(UserError, message):
        experiment.load_dataset(testing.resolved(dataset=f"npz:{path}"))

  def test_missing_and_unreadable_files(self):
    with tempfile.TemporaryDirectory() as tmp:
      missing = os.path.join(tmp, "nope.npz")
      with self.assertRaisesRegex(UserError, "does not exist"):
        experiment.load_dataset(testing.resolved(dataset=f"npz:{missing}"))
      garbage = os.path.join(tmp, "garbage.npz")
      with open(garbage, "wb") as f:
        f.write(b"not a zip file at all")
      with self.assertRaisesRegex(UserError, "is not a readable .npz file"):
        experiment.load_dataset(testing.resolved(dataset=f"npz:{garbage}"))

  def test_unknown_dataset(self):
    with self.assertRaisesRegex(UserError, "unknown dataset 'mnist_foo'"):
      experiment.load_dataset(testing.resolved(dataset="mnist_foo"))

  def test_synthetic_is_deterministic(self):
    config = testing.tiny_config(dataset="synthetic", synthetic_examples=16)
    a, b = (experiment.load_dataset(experiment.resolve(config)),
            experiment.load_dataset(experiment.resolve(config)))
    np.testing.assert_array_equal(a.x_train, b.x_train)
    self.assertEqual(a.x_train.shape, (16, 64, 64, 3))


if __name__ == "__main__":
  absltest.main()
