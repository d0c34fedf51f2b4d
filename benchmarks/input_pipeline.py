r"""Images/s of the tfds input pipeline alone (no model), next to what a training step consumes.

  python -m benchmarks.input_pipeline [--batches=30] [--out=docs/input_pipeline.json]

Two sources, both through the real tfds code path (`tfds.testing.mock_data`, no download):
  cifar     mocked cifar10: 32×32 PNGs, decoded once and cached, then pad-crop + flip per epoch
            (at the native 32², the resize to a model's size is left out).
  imagenet  imagenet2012 records replaced by real JPEGs of ImageNet's typical size (500×375,
            quality 90): read, shuffled, decoded, shorter side resized to 256, random 224² crop,
            flip, PCA lighting, normalised — every image, every epoch (imagenet2012 is not cached).
Then one training step of the single-device `alexnet_owt` (224², float32) on this machine, and the
rate 8 H100s would consume at a stated MFU, from the model's FLOPs per image.

Prints one JSON object and writes it to --out (docs/input_pipeline.md's table is made from it):
per source the median images/s over --batches global batches of 256 after a warm-up, and the
time the cache took to fill.
"""

import json
import os
import time

from absl import app, flags

from benchmarks import step_timing, tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_BATCHES = flags.DEFINE_integer("batches", 30, "Timed global batches per source.")
_EXAMPLES = flags.DEFINE_integer("examples", 2048, "Mocked examples per input shard.")
_TRAIN_STEPS = flags.DEFINE_integer("train_steps", 5, "Timed alexnet_owt steps (0: skip).")
_OUT = flags.DEFINE_string("out", os.path.join(tables.DOCS, "input_pipeline.json"),
                           "Where the JSON goes.")

GLOBAL_BATCH = 256
H100_BF16_PEAK = 989e12  # FLOP/s, dense (NVIDIA's H100 SXM datasheet)
# Well-tuned convnets reach 15-20% MFU (NVIDIA's ResNet-50 examples: 2,470 images/s on an
# A100 with AMP, about 19%).
CONVNET_MFU = 0.15


def _realistic_jpegs(count: int):
  """`count` distinct 500×375 JPEGs: smooth gradients plus noise, so that they compress and
  decode like photographs rather than like white noise."""
  import numpy as np
  import tensorflow as tf
  rng = np.random.default_rng(0)
  rows, cols = np.mgrid[0:375, 0:500]
  images = []
  for i in range(count):
    base = (np.stack([rows * (0.3 + 0.1 * c) + cols * (0.2 + 0.05 * i % 7) for c in range(3)], -1)
            % 256)
    noisy = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    images.append(tf.io.encode_jpeg(noisy, quality=90).numpy())
  return images


def _rate(source, batches: int) -> dict:
  """Median images/s of `batches` global batches after 3 warm-up batches."""
  import numpy as np
  stream = source.train_batches(GLOBAL_BATCH, seed=0,
                                position=source.position_at(0, GLOBAL_BATCH),
                                shard=slice(0, GLOBAL_BATCH))
  for _ in range(3):
    next(stream)
  times = []
  for _ in range(batches):
    start = time.perf_counter()
    next(stream)
    times.append(time.perf_counter() - start)
  return {"images_per_sec_median": round(GLOBAL_BATCH / float(np.median(times)), 1),
          "images_per_sec_mean": round(GLOBAL_BATCH * batches / float(np.sum(times)), 1),
          "batches": batches}


def measure_pipeline(name: str, examples: int, batches: int) -> dict:
  import numpy as np
  import tensorflow as tf
  import tensorflow_datasets as tfds
  import experiment
  from configs import default

  config = default.get_config()
  config.dataset = name
  config.data_dir = os.path.join(ROOT, "runs", "no_tfds_data")  # nothing is read from it
  config.image_size = 32 if name == "cifar10" else 224
  mock = dict(num_examples=examples)
  if name == "imagenet2012":
    jpegs = _realistic_jpegs(64)

    def as_dataset(self, split, decoders=None, read_config=None, **kwargs):
      del self, split, decoders, read_config, kwargs
      return tf.data.Dataset.from_tensor_slices({
          "image": [jpegs[i % len(jpegs)] for i in range(examples)],
          "label": np.arange(examples) % 1000, "file_name": ["x.JPEG"] * examples})

    mock = dict(as_dataset_fn=as_dataset)
  start = time.perf_counter()
  with tfds.testing.mock_data(**mock):
    source = experiment.load_dataset(experiment.resolve(config))
  result = {"source": name, "image_size": config.image_size, "global_batch": GLOBAL_BATCH,
            "cached": source.spec.cache, "setup_s": round(time.perf_counter() - start, 1)}
  result.update(_rate(source, batches))
  return result


def measure_train_step(steps: int) -> dict:
  """Images/s of the single-device alexnet_owt training step, batch 32, 224², float32."""
  import numpy as np
  from configs import default

  config = default.for_scheme("single", 1, 1, global_batch_size=32)
  config.model, config.image_size = "alexnet_owt", 224
  step, _, _, _, _ = step_timing.compile_step(config, 1000)
  times = step_timing.time_steps(step, steps)
  return {"model": "alexnet_owt", "devices": 1, "batch": config.global_batch_size,
          "images_per_sec_median": round(config.global_batch_size / float(np.median(times)), 1),
          "steps": steps}


def main(argv):
  del argv
  from hybrid_parallel import models
  from hybrid_parallel.analysis import costmodel
  flops = costmodel.training_flops_per_image(models.ARCHITECTURES["alexnet_owt"], 224, 1000)
  result = {
      "cpu_count": os.cpu_count(),
      "pipelines": [measure_pipeline(n, _EXAMPLES.value, _BATCHES.value)
                    for n in ("cifar10", "imagenet2012")],
      "train_step_here": measure_train_step(_TRAIN_STEPS.value) if _TRAIN_STEPS.value else None,
      "eight_h100_need": {
          "training_flops_per_image": round(flops / 1e9, 2) * 1e9,
          "assumed_mfu": CONVNET_MFU, "peak_flops_per_gpu": H100_BF16_PEAK,
          "images_per_sec": round(8 * H100_BF16_PEAK * CONVNET_MFU / flops)},
  }
  print(json.dumps(result, indent=1))
  tables.publish(result, _OUT.value)


if __name__ == "__main__":
  app.run(main)
