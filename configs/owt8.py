r"""Krizhevsky 2014, "one weird trick": the one-column AlexNet on 8 workers × 128 images, 250 steps.

Conv layers data parallel over all 8 devices (batch split over data × model); FC layers model
parallel over the model axis, each device taking the whole batch of its data group (variant (a)).
Every layer learns at the reference batch's 0.01, unscaled: a batch of 1024 is 71% of digits'
1,437 training images, little gradient noise for a scaled rate to make up for, and every scaled
rate (his conv × 8, √8 with warmup) sits at the edge of divergence here. One step per epoch: 250
epochs, the rate × 0.1 from epoch 200.

  python main.py --config=configs/owt8.py

Expected: about 98% test top-1 on digits (98.4 ± 0.6% over seeds 0-2, docs/schemes.md's owt
table). Cost: about 10 minutes on a 2-core CPU, 8 simulated devices; docs/configs.md has the
measured run.
"""

from configs import default


def get_config():
  config = default.for_scheme("owt", 2, 4, global_batch_size=1024)
  config.model = "alexnet_owt"
  # Every layer at the reference batch's 0.01: the rules that scale it up sit at the edge of
  # divergence on digits at batch 1024 (module docstring), and at 0.01 there is nothing to warm up.
  config.lr_scaling = "none"
  config.num_epochs = 250
  config.lr_decay_epochs = (200,)
  return config
