r"""Krizhevsky 2014's variable batch size: owt8 with scheme (b) and an FC update after every pass.

The conv layers are data parallel over all 8 devices and train at batch 8 × 128 = 1024; the FC
layers, split over the 4-way model axis, run in 4 passes per step (in pass k worker k's 128 rows
of each data group go to every worker) and are updated after every pass, at batch 2 × 128 = 256
— his (1024, 128) row, with the FC batch per data group. The conv layers learn at owt8's 0.01,
the FC layers, at a quarter of the conv batch, at a quarter of it per pass (the linear rule per
layer group): four updates per step move them as far as owt8's one. So it differs from owt8 only
in the FC batch, the comparison Krizhevsky's Table 1 makes.

  python main.py --config=configs/owt8_variable.py

Expected: about 98% test top-1 on digits, owt8's (98.4 ± 0.6% over seeds 0-2, the same on each
seed; docs/schemes.md's owt table). Cost: about 12 minutes on a 2-core CPU, 8 simulated devices;
docs/configs.md has the measured run.
"""

from configs import owt8


def get_config():
  config = owt8.get_config()
  config.owt_variant = "b"
  config.fc_updates_per_step = config.mesh.model
  # The conv layers at owt8's 0.01; the FC layers, at a quarter of the conv batch, at a quarter of
  # the rate per pass (the linear rule per layer group): four passes move them as far per step
  # as owt8's one update.
  config.lr_multipliers.fc = 1 / config.fc_updates_per_step
  return config
