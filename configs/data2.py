r"""Yadan et al. 2013, Table 1, row 3: AlexNet data-parallel on 2 devices, 128 images each.

Every device holds the whole network; gradients are summed over the data axis each step.

  python main.py --config=configs/data2.py

Expected: about 96% test top-1 on digits, single's within about a point (the same SGD). Cost:
about 3 minutes on a 2-core CPU, 2 simulated devices; docs/configs.md has the measured run.
"""

from configs import default


def get_config():
  return default.for_scheme("data", 2, 1)
