r"""Krizhevsky 2014, "one weird trick": the one-column AlexNet on 8 workers × 128 images.

Conv layers data parallel over all 8 devices (batch split over data × model); FC layers model
parallel over the model axis, each device taking the whole batch of its data group. Conv LR as
the linear rule gives for batch 1024 (the per-layer rule, conv × K / FC × 1, is issue #4's).

  python main.py --config=configs/owt8.py

Expected: ≥ 90% test top-1 on digits (slower on a CPU: 8 simulated devices share its cores).
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model = "alexnet_owt"
  config.parallelism = "owt"
  config.mesh.data, config.mesh.model = 2, 4
  config.global_batch_size = 1024
  return config
