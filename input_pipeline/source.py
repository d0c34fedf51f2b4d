"""The interface every input source implements; input_pipeline/__init__.py reads sources only
through it (arrays.Dataset, prepared.PreparedDataset, decoded.DecodedDataset,
tfds_source.TfdsDataset)."""

import abc
import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class DeviceInput:
  """What turns a source's batches, as they arrive on the devices, into the model's images —
  traced into the train and eval steps' own programs (experiment.fed_steps), so that a step's
  input work and the step are one program, compiled once for the run.

  Attributes:
    train: `(held, inputs, step) -> images` in the model's dtype: `inputs` is what
      `train_batches` yields (images, or row numbers of a set on the devices), `step` the step.
    evaluate: `inputs -> images` (of `eval_batches`).
    held: the arrays the source keeps on the devices for every batch (a training set placed
      there), an argument of the train step's program; () where there are none. Until placed
      (`device_input(place=False)`), their shapes only (jax.ShapeDtypeStruct): enough to
      compile the step, and to weigh it, before the set is read.
    read: puts `held` on the devices where it is shapes only so far; None once placed.
  """
  train: Callable
  evaluate: Callable
  held: object = ()
  read: Callable[[], object] | None = None

  @classmethod
  def holding(cls, shape: jax.ShapeDtypeStruct, read: Callable[[], jax.Array], *, place: bool,
              train: Callable, evaluate: Callable) -> "DeviceInput":
    """The DeviceInput of a source that keeps one array of `shape` on the devices, which
    `read` puts there: read now where `place`, else by `placed`."""
    if place:
      return cls(train, evaluate, held=read())
    return cls(train, evaluate, held=shape, read=read)

  def placed(self) -> "DeviceInput":
    """This input with its arrays on the devices (read now, where they were shapes only)."""
    return self if self.read is None else dataclasses.replace(self, held=self.read(), read=None)

  @functools.cached_property
  def _train_program(self):
    return jax.jit(self.train)

  @functools.cached_property
  def _eval_program(self):
    return jax.jit(self.evaluate)

  def finish_train(self, inputs, step: int):
    """`train` as a program of its own (for looking at batches; the step runs it inside)."""
    return self._train_program(self.held, inputs, np.int32(step))

  def finish_eval(self, inputs):
    """`evaluate` as a program of its own."""
    return self._eval_program(inputs)


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
    from `position` on. "images" is what `device_input`'s train function finishes into
    images: the images themselves, or (arrays.py, decoded.py) the row numbers of images the
    devices hold."""

  @abc.abstractmethod
  def eval_batches(self, batch: int, shard: slice):
    """Yields (images, labels, weights) for rows `shard` of each evaluation batch; the last is
    padded with weight-0 repeats."""

  def device_input(self, sharding, *, seed: int, dtype=jnp.float32,
                   place: bool = True) -> DeviceInput:
    """What finishes this source's batches, laid out as `sharding`, on the devices, into the
    model's `dtype` — placing what the source keeps there, at once, unless not to `place` it
    (then DeviceInput.held is its shapes: the steps compile, a finished run evaluates, and
    `DeviceInput.placed` reads it when training starts). By default the batches arrive
    finished: only cast."""
    del sharding, seed, place
    return DeviceInput(train=lambda held, images, step: images.astype(dtype),
                       evaluate=lambda images: images.astype(dtype))


class StepPositioned(Source):
  """A source whose batch of step s is a pure function of (seed, s): its position is the step."""
  positions_are_steps = True

  def position_at(self, step: int, global_batch: int) -> int:
    del global_batch  # batches are indexed by step
    return step
