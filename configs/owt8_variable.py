r"""Krizhevsky 2014's variable batch size: owt8 with scheme (b) and an FC update after every pass.

The conv layers are data parallel over all 8 devices and train at batch 8 × 128 = 1024; the FC
layers, split over the 4-way model axis, run in 4 passes per step (in pass k worker k's 128 rows
of each data group go to every worker) and are updated after every pass, at batch 2 × 128 = 256
— his (1024, 128) row, with the FC batch per data group. Krizhevsky's learning rates: the base
rate for the FC layers, × 8 (the conv batch's factor) for the conv layers, given by
lr_multipliers rather than a global scaling rule.

  python main.py --config=configs/owt8_variable.py

Measured result: see the closing figures in docs/schemes.md (owt variants on digits).
"""

from configs import owt8


def get_config():
  config = owt8.get_config()
  config.owt_variant = "b"
  config.fc_updates_per_step = config.mesh.model
  config.lr_scaling = "none"
  config.lr_multipliers.conv = 8.0
  config.lr_multipliers.fc = 1.0
  return config
