r"""Krizhevsky 2014, "one weird trick": the one-column AlexNet on 8 workers × 128 images.

Conv layers data parallel over all 8 devices (batch split over data × model); FC layers model
parallel over the model axis, each device taking the whole batch of its data group.

Krizhevsky's own per-layer rule — conv LR × K, FC LR × 1 for K = 8 workers — is
  --config.lr_scaling=none --config.lr_multipliers.conv=8
On digits it stays at chance (loss 2.30 after 100 steps, with or without a 50-step warmup); with
conv × √8, FC × 1 it reaches 78.06% after 250 steps. This config keeps one rate for all layers:

Learning rate: 0.01 × √8 ≈ 0.028 (the √k rule Krizhevsky 2014 derives) after a 10-epoch gradual
warmup. The linear rule's 0.08 diverged here (loss 3.9 at step 20, then stuck at chance): a batch
of 1024 is most of digits' 1,437 training images. One step per epoch, hence 250 epochs.

  python main.py --config=configs/owt8.py

Measured: 82.50% test top-1 on digits after 250 steps (2026-11-22, the project's 2-core CPU, 8
simulated devices, 12-14 minutes; the same figure in two runs: table1 and owt_variants). The rate
sits at the edge of stability: test top-1 falls to chance around step 50 and climbs back from step
100 (docs/schemes.md has the curve). An earlier machine measured 97.78%. configs/owt8_variable.py
(scheme (b), an FC update per pass, lower FC rate) reaches 98.06% on the same budget.
"""

from configs import default


def get_config():
  config = default.for_scheme("owt", 2, 4, global_batch_size=1024)
  config.model = "alexnet_owt"
  config.lr_scaling = "sqrt"
  config.num_epochs = 250
  config.warmup_epochs = 10
  config.lr_decay_epochs = (200,)
  return config
