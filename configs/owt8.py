r"""Krizhevsky 2014, "one weird trick": the one-column AlexNet on 8 workers × 128 images.

Conv layers data parallel over all 8 devices (batch split over data × model); FC layers model
parallel over the model axis, each device taking the whole batch of its data group. One learning
rate for all layers, scaled linearly to batch 1024 (0.08) after a gradual warmup (Goyal et al.);
Krizhevsky's per-layer rule (conv × K, FC × 1) is not implemented yet.

A global batch of 1024 is 1 step per epoch of digits' 1,437 training images, hence many epochs.

  python main.py --config=configs/owt8.py

Expected: ≥ 90% test top-1 on digits (measured: see README).
"""

from configs import default


def get_config():
  config = default.for_scheme("owt", 2, 4, global_batch_size=1024)
  config.model = "alexnet_owt"
  config.num_epochs = 120
  config.warmup_epochs = 10
  config.lr_decay_epochs = (90,)
  return config
