"""A real, prepared tfds `mnist` on disk for tests that need real tfrecord files."""

import atexit
import functools
import json
import os
import shutil
import tempfile

import tensorflow as tf
import tensorflow_datasets as tfds

TMP = tempfile.mkdtemp(prefix="hybrid_parallel_tfds_")
atexit.register(shutil.rmtree, TMP, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def prepared_mnist_dir(corrupt_train_records=()) -> str:
  """A data_dir holding a real, prepared `mnist` of 20 train and 20 test images: tfds's DummyMnist
  generated and renamed; the train records listed get bytes that are no image."""
  data_dir = tempfile.mkdtemp(dir=TMP)
  tfds.testing.DummyMnist(data_dir=os.path.join(data_dir, "gen")).download_and_prepare()
  source = os.path.join(data_dir, "gen", "dummy_mnist", "3.0.1")
  target = os.path.join(data_dir, "mnist", "3.0.1")
  os.makedirs(target)
  for file in os.listdir(source):
    shutil.copy(os.path.join(source, file), os.path.join(target, file.replace("dummy_mnist",
                                                                              "mnist")))
  info_path = os.path.join(target, "dataset_info.json")
  with open(info_path) as f:
    info = json.load(f)
  info["name"] = "mnist"
  with open(info_path, "w") as f:
    json.dump(info, f)
  if corrupt_train_records:
    path = os.path.join(target, "mnist-train.tfrecord-00000-of-00001")
    records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    with tf.io.TFRecordWriter(path) as writer:
      for i, record in enumerate(records):
        if i in corrupt_train_records:
          example = tf.train.Example.FromString(record)
          example.features.feature["image"].bytes_list.value[0] = b"not an image"
          record = example.SerializeToString()
        writer.write(record)
  return data_dir


