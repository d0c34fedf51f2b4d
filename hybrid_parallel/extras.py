"""The optional package sets ("extras": pyproject.toml's optional dependencies, each pinned by a
requirements file) and the one sentence that names the extra to install where a command needs a
package of one that is missing — asked before the command does any work, never a
ModuleNotFoundError (nor, for an image decoder, "could not be decoded").

What `pip install -r requirements.txt` installs needs none of them: digits, synthetic and npz
data, every scheme and backend on CPUs (and, with JAX's CUDA build, on GPUs).
"""

import dataclasses
import importlib.util

from hybrid_parallel import checks
from hybrid_parallel.errors import UserError


@dataclasses.dataclass(frozen=True)
class Extra:
  install: str  # the command that installs it.
  packages: dict[str, str]  # importable module → the distribution that installs it.


EXTRAS = {
    # The ImageNet paths: tfds datasets (TensorFlow's tf.data) and prepared datasets.
    "imagenet": Extra("pip install -r requirements-imagenet.txt, or pip install \".[imagenet]\"",
                      {"tensorflow": "tensorflow-cpu",
                       "tensorflow_datasets": "tensorflow-datasets", "grain": "grain",
                       "array_record": "array-record", "PIL": "pillow",
                       "simplejpeg": "simplejpeg"}),
    # JAX's TPU backend, which also compiles for TPU topologies on a machine without one.
    "tpu": Extra("pip install -r requirements-tpu.txt, or pip install \".[tpu]\"",
                 {"libtpu": "libtpu"}),
    # The test tools, TensorBoard among them (it reads the event files back, and shows them).
    "test": Extra("pip install -r requirements-test.txt, or pip install \".[test]\"",
                  {"tensorboard": "tensorboard"}),
}


def missing(what: str, extra: str, modules=None) -> UserError | None:
  """One sentence naming the packages of `extra` that `what` (a command, a dataset) needs and
  this environment lacks, and how to install the extra; None where they are all here.

  Args:
    what: the subject of the sentence ("python -m input_pipeline.prepare").
    extra: a key of EXTRAS.
    modules: the importable names `what` needs; default: all of the extra's.
  """
  packages = EXTRAS[extra].packages
  absent = [packages[m] for m in (modules or packages) if importlib.util.find_spec(m) is None]
  if not absent:
    return None
  return UserError(f"{what} needs {checks.listing(absent)}, not installed here: install the {extra} extra "
                   f"({EXTRAS[extra].install}).")


def require(what: str, extra: str, modules=None) -> None:
  """Raises `missing`'s UserError where there is one."""
  if error := missing(what, extra, modules):
    raise error
