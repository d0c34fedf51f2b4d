"""Shared test helpers: tiny configs, random batches, a scheme built as train.py builds it, and a
few-step training helper."""

import contextlib
import hashlib
import importlib.util
import io
import math
import os
import sys
import unittest
from typing import NamedTuple
from unittest import mock

import jax
import numpy as np
from absl import flags

import experiment
from configs import default

IMAGE_SIZE = 64  # The smallest input the AlexNet stem and pools leave a feature map for.

# The tfds input pipeline's tests need TensorFlow (the imagenet extra: requirements-imagenet.txt),
# which requirements.txt does not install and a user's GPU machine may lack: there they are
# skipped, and the skip says why, rather than failing.
_TENSORFLOW_PACKAGES = ("tensorflow", "tensorflow_datasets")
TENSORFLOW_MISSING = [name for name in _TENSORFLOW_PACKAGES
                      if importlib.util.find_spec(name) is None]
WITHOUT_TENSORFLOW = (f"needs {' and '.join(TENSORFLOW_MISSING)}, not installed here (the "
                      f"imagenet extra: requirements-imagenet.txt)" if TENSORFLOW_MISSING else None)
needs_tensorflow = unittest.skipIf(WITHOUT_TENSORFLOW, WITHOUT_TENSORFLOW)


def skip_module_without_tensorflow(module: str) -> None:
  """Skips test `module` (unittest and pytest both take a SkipTest raised at import) where
  TensorFlow is missing; the module calls it with its __name__ before it imports TensorFlow."""
  if WITHOUT_TENSORFLOW:
    raise unittest.SkipTest(f"{module}: {WITHOUT_TENSORFLOW}")


# The prepared datasets' readers and writer (requirements-imagenet.txt, the imagenet extra), which
# requirements.txt alone does not install.
_PREPARED_PACKAGES = ("grain", "array_record", "simplejpeg", "PIL")
PREPARED_MISSING = [name for name in _PREPARED_PACKAGES if importlib.util.find_spec(name) is None]


def skip_module_without_prepared_packages(module: str) -> None:
  """Skips test `module`, as skip_module_without_tensorflow does, where the prepared datasets'
  packages are missing."""
  if PREPARED_MISSING:
    raise unittest.SkipTest(f"{module}: needs {' and '.join(PREPARED_MISSING)}, not installed "
                            f"here (the imagenet extra: requirements-imagenet.txt)")


# What `pip install -r requirements.txt` alone leaves out: the imagenet extra's packages, the
# test extra's TensorBoard, and JAX's TPU and CUDA backends (requirements-test.txt installs them
# here, to compile for TPUs and GPUs).
NOT_IN_THE_BASE_INSTALL = ("tensorflow", "tensorflow_datasets", "grain", "array_record", "PIL",
                           "simplejpeg", "tensorboard", "libtpu", "jax_cuda12_plugin",
                           "jax_cuda13_plugin", "jax_plugins")


# A sitecustomize that makes importing each of MISSING fail as a package that is not installed
# does (ModuleNotFoundError), and hides the JAX plugins among them from JAX's plugin discovery,
# which reads the installed distributions' entry points.
_SITECUSTOMIZE = """import importlib.metadata
import sys

MISSING = {missing!r}
for name in MISSING:
  sys.modules[name] = None
_entry_points = importlib.metadata.entry_points


def entry_points(**selection):
  found = _entry_points(**selection)
  if selection.get("group") != "jax_plugins":
    return found
  return importlib.metadata.EntryPoints(
      e for e in found if e.value.split(".")[0] not in MISSING)


importlib.metadata.entry_points = entry_points
"""


def without_modules(modules=NOT_IN_THE_BASE_INSTALL) -> str:
  """A sitecustomize's code by which `modules` are missing, as if never installed."""
  return _SITECUSTOMIZE.format(missing=tuple(modules))


def environment_with_sitecustomize(folder: str, code: str) -> dict[str, str]:
  """The environment of a process that runs `code` before anything else (a sitecustomize in
  `folder`): a machine without a package (`without_modules`), a device out of memory."""
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, "sitecustomize.py"), "w") as f:
    f.write(code)
  return {**os.environ, "PYTHONPATH": pythonpath_with(folder)}


def environment_without(folder: str, modules=NOT_IN_THE_BASE_INSTALL) -> dict[str, str]:
  """The environment of a process in which `modules` are missing, as if never installed."""
  return environment_with_sitecustomize(folder, without_modules(modules))


def digest(directory: str) -> dict[str, str]:
  """Every file under `directory` and the hash of its bytes."""
  digests = {}
  for root, _, files in os.walk(directory):
    for name in files:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        digests[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
  return digests


def pythonpath_with(first: str) -> str:
  """A PYTHONPATH of `first`, then the one this process was given: a machine may keep packages
  there (a GPU machine's may be installed with `pip --target`), which a subprocess still needs."""
  given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
  return os.pathsep.join([first, *given])


def main_in_process(args: list[str]) -> tuple[int, str]:
  """main.py's flag parsing and main() in this process, as `python main.py ARGS` runs them:
  (exit status, stderr). The suite's simulated devices stand in for the ones main.py would
  simulate: JAX runs already, and platforms.start has nothing left to set."""
  import main
  from hybrid_parallel import platforms
  flags.FLAGS.unparse_flags()
  for name in [n for n in flags.FLAGS if n.startswith("config.")]:
    delattr(flags.FLAGS, name)  # the overrides of the last parse's config (redefined anew).
  argv = ["main.py", *args]
  stderr = io.StringIO()
  # ml_collections reads the --config.FIELD overrides from sys.argv itself.
  with mock.patch.object(sys, "argv", argv), contextlib.redirect_stderr(stderr), \
      mock.patch.object(platforms, "start"):
    try:
      main.main(main._parse_flags(argv))
    except SystemExit as e:
      return e.code, stderr.getvalue()
  return 0, stderr.getvalue()


@contextlib.contextmanager
def compiled_programs():
  """Yields a list that fills with the names of the programs XLA compiles (or the persistent
  cache gives back) in the block, as JAX names them: "jit(train_step)", "jit(<lambda>)"."""
  names = []

  def heard(event, _, fun_name="", **__):
    if event == "/jax/core/compile/backend_compile_duration":
      names.append(fun_name)

  jax.monitoring.register_event_duration_secs_listener(heard)
  try:
    yield names
  finally:
    jax.monitoring.unregister_event_duration_listener(heard)


def tiny_config(**overrides):
  """The default config on `alexnet_tiny`, with `overrides` applied."""
  config = default.get_config()
  config.model = "alexnet_tiny"
  config.image_size = IMAGE_SIZE
  config.update(overrides)
  return config


def resolved(**overrides):
  """The run of `tiny_config(**overrides)`."""
  return experiment.resolve(tiny_config(**overrides))


def random_batches(n: int, batch: int, *, channels: int = 3, classes: int = 10, seed: int = 0):
  """`n` (images, labels) pairs of normal noise and random labels."""
  rng = np.random.RandomState(seed)
  return [(rng.randn(batch, IMAGE_SIZE, IMAGE_SIZE, channels).astype(np.float32),
           rng.randint(0, classes, batch).astype(np.int32)) for _ in range(n)]


def resolve(model_name: str, scheme: str, data: int, model: int, config, batch: int):
  """The run `config` describes with this model, scheme, mesh and global batch."""
  config = config.copy_and_resolve_references()
  config.model, config.parallelism, config.global_batch_size = model_name, scheme, batch
  config.mesh.data, config.mesh.model = data, model
  return experiment.resolve(config)


# The tests' schedule: epochs of 10 steps, runs of 100 (a compiled program's constants).
SCHEDULE = {"steps_per_epoch": 10, "total_steps": 100}


def build(model_name: str, scheme: str, data: int, model: int, config, batch: int):
  """The experiment of `config` with this model, scheme, mesh and global batch (10 classes, 3
  channels, the tests' SCHEDULE)."""
  return experiment.build(resolve(model_name, scheme, data, model, config, batch),
                          num_classes=10, channels=3, **SCHEDULE)


def put(run: experiment.Experiment, *arrays):
  """`arrays` laid out as the run's global batches."""
  return tuple(jax.device_put(a, run.batch_sharding) for a in arrays)


def train_steps(run: experiment.Experiment, batches, state=None):
  """Runs one step per batch from `state` (default: the initial state).

  Returns:
    (state, losses, variables): the state after the last step, the per-step losses and the
    variables to evaluate (numpy).
  """
  state, losses = run.scheme.state if state is None else state, []
  for images, labels in batches:
    state, metrics = run.scheme.train_step(state, *put(run, images, labels))
    losses.append(float(metrics["train_loss"]))
  variables = jax.tree.map(np.asarray, run.scheme.eval_variables(state))
  return state, np.array(losses), variables


def float64_steps(model_name: str, scheme: str, data: int, model: int, config, batch: int,
                  batches):
  """`train_steps` of the same run from its initial state with every value in float64
  (`models.DTYPES`): the exact answer its float32 runs approximate (tests/numerics.py).

  Returns:
    (losses, variables) in float64 numpy.
  """
  config = config.copy_and_resolve_references()
  config.dtype = "float64"
  with jax.enable_x64(True):
    _, losses, variables = train_steps(build(model_name, scheme, data, model, config, batch),
                                       batches)
  return losses, variables


class Interval(NamedTuple):
  """Where a figure a report rounded (or a quotient of such figures) truly lies: [low, high]."""
  low: float
  high: float

  def __truediv__(self, other: "Interval") -> "Interval":
    """The quotient's interval, for positive intervals."""
    assert self.low >= 0 and other.low > 0, (self, other)
    return Interval(self.low / other.high, self.high / other.low)

  def overlaps(self, other: "Interval") -> bool:
    return max(self.low, other.low) <= min(self.high, other.high)


def rounded(value: float, *, decimals: int | None = None, significant: int | None = None,
            ) -> Interval:
  """The values that `round(x, decimals)` (or rounding to `significant` figures) turns into
  `value`: value ± half a unit in its last kept place. (The float's own representation error,
  ~1e-16 relative, is covered by widening the half unit by a millionth of itself.)"""
  if decimals is not None:
    half = 0.5 * 10.0 ** -decimals
  else:
    half = 0.5 * 10.0 ** (math.floor(math.log10(abs(value))) - significant + 1) if value else 0.0
  half *= 1 + 1e-6
  return Interval(value - half, value + half)
