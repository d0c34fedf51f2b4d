r"""Yadan et al. 2013, Table 1, row 4: AlexNet data-parallel on 4 devices, 64 images each.

  python main.py --config=configs/data4.py

Expected: about 96% test top-1 on digits, single's within about a point (the same SGD). Cost:
about 3 minutes on a 2-core CPU, 4 simulated devices; docs/configs.md has the measured run.
"""

from configs import default


def get_config():
  return default.for_scheme("data", 4, 1)
