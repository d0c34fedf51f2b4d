"""The interface every input source implements; input_pipeline/__init__.py reads sources only
through it (arrays.Dataset, prepared.PreparedDataset, tfds_source.TfdsDataset)."""

import abc


class Source(abc.ABC):
  """A dataset the input pipeline reads: host batches of this process's rows, the position a
  checkpoint stores to continue after a batch, and what finishes a batch on the devices.

  Attributes (set by each source):
    name: what the config called it.
    num_classes, channels: of its labels and images.
    num_train: training examples (an epoch is num_train // global batch steps).
  """
  name: str
  num_classes: int
  channels: int
  num_train: int
  # True when a position is the next step's number (the batch of step s is a function of
  # (seed, s)); False when it is a list of every input shard's stream position (tfds).
  positions_are_steps: bool

  @abc.abstractmethod
  def position_at(self, step: int, global_batch: int):
    """The position after `step` steps of `global_batch` (for a run without a saved one)."""

  @abc.abstractmethod
  def train_batches(self, global_batch: int, *, seed: int, position, shard: slice):
    """Yields (images, labels, position after the batch) for rows `shard` of each global batch,
    from `position` on. "images" is what `device_transforms`' train function finishes into
    images: the images themselves, or (arrays.py) the row numbers of images the devices hold."""

  @abc.abstractmethod
  def eval_batches(self, batch: int, shard: slice):
    """Yields (images, labels, weights) for rows `shard` of each evaluation batch; the last is
    padded with weight-0 repeats."""

  def device_transforms(self, sharding, *, seed: int):
    """(train, eval): what finishes a host batch on the devices; train takes (images, step). By
    default nothing: the batches arrive finished."""
    del sharding, seed
    return (lambda images, step: images), (lambda images: images)


class StepPositioned(Source):
  """A source whose batch of step s is a pure function of (seed, s): its position is the step."""
  positions_are_steps = True

  def position_at(self, step: int, global_batch: int) -> int:
    del global_batch  # batches are indexed by step
    return step
