r"""Yadan et al. 2013, Table 1, row 4: AlexNet data-parallel on 4 devices, 64 images each.

  python main.py --config=configs/data4.py

Expected: single's test top-1 on digits within about a point (docs/schemes.md's table).
"""

from configs import default


def get_config():
  return default.for_scheme("data", 4, 1)
